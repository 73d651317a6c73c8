"""Parameters declared once: name, default, range, help and, for a constant from a paper, its
citation (scikit-learn's ``_param_validation``: ``Interval`` / ``StrOptions`` state a range in one
place). The settings dataclasses take their defaults and checks from a declaration, the commands
their ``argparse`` options (:meth:`Interval.add_argument`), and the dashboard its widgets and the
values a link may carry (``ui/widgets/ranges.py``), so a default, a slider and an error message cannot
drift apart.

Declarations of one analysis live beside it (the outlier thresholds in
:mod:`isoscope.analysis.outliers`, keep-K and α in :mod:`isoscope.analysis.quant.params`);
this module holds the type, the extraction's own parameters and the literature's constants that
several layers quote.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from isoscope.engine.errors import InputError


def _number(value: float) -> str:
    """How a bound reads in a message: 8192, 1,000,000, 0.5."""
    if float(value).is_integer():
        return f"{int(value):,}" if abs(value) >= 10_000 else str(int(value))
    return f"{value:g}"


def percent(share: float) -> str:
    """A share as a sentence writes it: 0.06 -> "6 %"."""
    return f"{share * 100:g} %"


N = TypeVar("N", int, float)


@dataclass(frozen=True)
class Interval(Generic[N]):
    """A number from ``low`` to ``high`` inclusive, ``default`` unless chosen, in steps of ``step``
    (None: any); ``integer`` values parse as int. ``name`` is the settings field and, with dashes,
    the command-line flag; ``unit`` ends the error message; ``citation`` names the source of the
    default when a paper set it. ``choices``, when given, are the values a page offers (a select
    slider; a link may carry only those), the default among them; a command takes any value in
    the range."""

    low: N
    high: N
    default: N
    step: float | None = None
    integer: bool = False
    name: str = ""
    help: str = ""
    unit: str = ""
    citation: str = ""
    choices: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if not self.low <= self.default <= self.high:
            raise ValueError(f"default {self.default} is outside [{self.low}, {self.high}]")
        if self.choices is not None and (
            self.default not in self.choices
            or not all(self.low <= c <= self.high for c in self.choices)
        ):
            raise ValueError(f"choices {self.choices} must hold the default {self.default}")

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def label(self) -> str:
        return self.name.replace("_", " ")

    def message(self, value: Any, label: str | None = None) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return (
            f"{label or self.label} must be between {_number(self.low)} and "
            f"{_number(self.high)}{unit}, got {value}"
        )

    def check(self, value: Any, label: str | None = None) -> Any:
        """``value`` when it lies in the range, else :class:`InputError` naming ``label`` (the
        flag for a command, the field's words for a dataclass)."""
        if not self.low <= value <= self.high:
            raise InputError(self.message(value, label))
        return value

    def parse(self, text: str) -> Any:
        """A link's or a form's text as a value in the range (ValueError otherwise); a float a
        hair outside a bound (a slider's step arithmetic) is put back on it."""
        value = int(text) if self.integer else float(text)
        if self.choices is not None:
            if value not in self.choices:
                raise ValueError(text)
            return value
        slack = 0 if self.integer else 1e-9 * max(1.0, abs(self.high), abs(self.low))
        if not self.low - slack <= value <= self.high + slack:
            raise ValueError(text)
        clamped = min(max(value, self.low), self.high)
        return int(clamped) if self.integer else float(clamped)

    def add_argument(
        self, parser: argparse.ArgumentParser | Any, help: str | None = None, **kwargs: Any
    ) -> None:
        """``--name`` with this default (``help`` overrides the declaration's words). The action
        keeps its declaration (``action.declaration``): a test checks that every option of a
        declared name was built here."""
        action = parser.add_argument(
            self.flag,
            type=int if self.integer else float,
            default=self.default,
            help=help or self.help or None,
            **kwargs,
        )
        cast(Any, action).declaration = self  # argparse's Action has no such field: ours


@dataclass(frozen=True)
class Options:
    """A value that is one of ``options`` (written as ``str(option)`` in a link); ``default``
    None means the first option."""

    options: tuple[Any, ...]
    default: Any = None

    def __post_init__(self) -> None:
        if self.default is not None and self.default not in self.options:
            raise ValueError(f"default {self.default!r} is not one of {self.options}")

    @property
    def index(self) -> int:
        """The default's position (for ``st.selectbox(index=...)``)."""
        return 0 if self.default is None else self.options.index(self.default)

    def parse(self, text: str) -> Any:
        for option in self.options:
            if str(option) == text:
                return option
        raise ValueError(text)


class Cited(float):
    """A constant from a paper: a float that carries its ``citation`` (so a message, a slider and
    a verdict quote one value, and say whose it is)."""

    citation: str

    def __new__(cls, value: float, citation: str) -> Cited:
        self = super().__new__(cls, value)
        self.citation = citation
        return self

    def __reduce__(self):  # pickles (a cached result, a worker process) as the pair it is
        return (Cited, (float(self), self.citation))


# ----------------------------------------------------------------------------- the extraction
# Every command that extracts hidden states and the sidebar's extraction read these defaults; an
# analysis that needs another one declares its own beside it (the massive-activation scan, the
# queries/keys capture, the quantization scan), read by its command and its page alike.

# 128 tokens hold a sentence or a short paragraph whole; attention's cost grows with the square of
# the length, so a longer default would slow every page's first extraction on a CPU.
MAX_LENGTH = Interval(
    2, 8192, 128, integer=True, name="max_length", unit="tokens",
    help="tokens per text (longer texts are cut)",
)  # fmt: skip
# 32 texts: wide enough to keep a device busy; the token budget caps a batch of long texts.
BATCH_SIZE = Interval(1, 4096, 32, integer=True, name="batch_size", help="texts per batch at most")
# 8000 token vectors: CKA's 8000 x 8000 float32 Gram matrix is 256 MB, and thousands of tokens
# from every text of a corpus enter the pairwise metrics.
SAMPLE_SIZE = Interval(
    2, 1_000_000, 8000, integer=True, name="sample_size", unit="tokens",
    help="token vectors kept for pairwise metrics",
)  # fmt: skip
# 8192 padded tokens: a full batch (32 texts) of 256-token texts; halved automatically when a
# device runs out of memory.
TOKEN_BUDGET = Interval(
    1, 1 << 24, 8192, integer=True, name="token_budget", unit="padded tokens per batch",
    help="padded tokens per batch (texts x longest text)",
)  # fmt: skip
# The max lengths an analysis page with its own length offers on a select slider.
PAGE_LENGTHS = (16, 32, 64, 128, 256)
# Seed 0 everywhere (the token sample, text splits, random controls): a rerun reproduces a result.
SEED = Interval(0, 2**32 - 1, 0, integer=True, name="seed", help="seed of the token sample")

# The largest file a user may give: a corpus (or each of its shards), an image or audio file, a
# CSV of sentence pairs or word-sense rows.
MAX_FILE_BYTES = 50 * 1024 * 1024  # 50 MiB

# ----------------------------------------------------------------------------- from the literature
DETTMERS_2022 = (
    "Dettmers, Lewis, Belkada & Zettlemoyer 2022, LLM.int8(): 8-bit Matrix Multiplication for "
    "Transformers at Scale, arXiv 2208.07339"
)
SUN_2024 = (
    "Sun, Chen, Kolter & Liu 2024, Massive Activations in Large Language Models, arXiv 2402.17762"
)

# |x| >= 6 at a projection input is an outlier feature; assumes unit-scale norm outputs.
LLM_INT8_THRESHOLD = Cited(6.0, DETTMERS_2022)
# A massive activation: |h| > 100 and > 1000 x the median |h| of its hidden state.
MASSIVE_ABS_THRESHOLD = Cited(100.0, SUN_2024)
MASSIVE_MEDIAN_RATIO = Cited(1000.0, SUN_2024)


def massive_rule(times: str = "×") -> str:
    """Sun et al.'s rule as the pages and the report write it: "|h| > 100 and > 1000 × the median"."""
    return f"|h| > {MASSIVE_ABS_THRESHOLD:g} and > {MASSIVE_MEDIAN_RATIO:g} {times} the median"
