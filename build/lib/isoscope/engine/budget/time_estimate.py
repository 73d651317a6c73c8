"""The first page's time, estimated before the load (:class:`TimeEstimate`): the phases before
the extraction (the download, a GGUF's conversion, the load) and the extraction itself, each from
this cache's recorded speeds (:mod:`isoscope.engine.budget.throughput`), shown while the weights
are downloaded or loaded (:func:`time_preflight`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from isoscope.engine.budget.batching import Batching, batch_count, padded_tokens, work_shares
from isoscope.engine.budget.estimates import PRIOR_BASIS, describe_seconds
from isoscope.engine.budget.throughput import (
    CONVERSION,
    DOWNLOAD,
    Phase,
    device_key,
    extraction_rate,
    extraction_seconds,
    load_phase,
    phase_estimate,
    token_counts,
)
from isoscope.engine.load.preflight import stored_bytes_per_parameter

if TYPE_CHECKING:
    from isoscope.engine.budget.calibration import Shape


def phases_before(root: Path, device: str, parameters: int, folder: Path) -> tuple[Phase, ...]:
    """The phases before the extraction of the model at ``folder`` (``on_preflight``'s: a
    ``.gguf`` file before its conversion, a Hub snapshot before its weights, or a checkpoint
    folder): the download when the snapshot's weights are missing, the conversion when the
    GGUF has no converted copy yet, and the load."""
    folder = Path(folder)
    phases = []
    if folder.suffix.lower() == ".gguf" and folder.is_file():
        from isoscope.engine.load.gguf import is_converted

        if not is_converted(folder):
            phases.append(phase_estimate(root, CONVERSION, device, parameters))
    elif _download_pending(folder):
        size = parameters * stored_bytes_per_parameter(folder)
        phases.append(phase_estimate(root, DOWNLOAD, device, size))
    phases.append(phase_estimate(root, load_phase(folder), device, parameters))
    return tuple(phases)


def _download_pending(folder: Path) -> bool:
    """Whether ``folder`` is a Hub snapshot whose weights have not been downloaded yet."""
    from isoscope.engine.load.hub import hub_cache_dir, snapshot_complete

    try:
        in_hub = folder.resolve().is_relative_to(hub_cache_dir().resolve())
    except OSError:
        return False
    return in_hub and not snapshot_complete(folder)


@dataclass(frozen=True)
class TimeEstimate:
    """The first page's estimated time, before the load: the phases before the extraction
    (``before``: download, conversion, load; :func:`phases_before`), then the extraction,
    parameters (from the safetensors headers) x padded tokens of the corpus (its tokenizer) x
    this device's rate at that size (:func:`extraction_rate`; ``seconds`` None before the
    device's first measurement, ``basis`` how the rate was obtained)."""

    parameters: int
    tokens: int
    device: str
    seconds: float | None
    basis: str = ""
    before: tuple[Phase, ...] = ()
    # the extraction's share done after each count of texts (:func:`work_shares`), so that its
    # first batches (the longest texts) can be read against the estimate
    shares: tuple[float, ...] = field(default=(), repr=False, compare=False)

    @property
    def total_seconds(self) -> float | None:
        """Every phase and the extraction; None while the extraction is not estimated."""
        if self.seconds is None:
            return None
        return self.seconds + sum(p.seconds for p in self.before)

    def describe(self, first_look_s: float | None = None) -> str:
        """One line: the total, each phase named, and how each rate was obtained; with
        ``first_look_s`` (the UI's budget) it adds that the Overview opens with a first look
        when the whole corpus takes longer (the CLI runs what it is asked)."""
        sizes = f"{self.parameters / 1e6:,.1f} M parameters x {self.tokens:,} tokens"
        phases = ", ".join(f"{p.name} {describe_seconds(p.seconds)}" for p in self.before)
        priors = [p.name for p in self.before if p.basis == PRIOR_BASIS]
        at_prior = f"; {' and '.join(priors)} at {PRIOR_BASIS}" if priors else ""
        total = self.total_seconds
        if total is None or self.seconds is None:  # the second follows from the first
            first = f"first page: {phases}, then " if phases else "first page: "
            return (
                f"{first}no extraction speed measured on {self.device} yet ({sizes}{at_prior}); "
                "the first batch measures it"
            )
        extraction = f"extraction {describe_seconds(self.seconds)}"
        line = (
            f"first page: {describe_seconds(total)} on {self.device}: "
            f"{', '.join(filter(None, [phases, extraction]))} "
            f"({sizes}; extraction speed {self.basis}{at_prior})"
        )
        if first_look_s is not None and total > first_look_s:
            line += f"; the Overview opens with a first look of {first_look_s:.0f} s or less"
        return line


def folder_tokenizer(folder: Path):
    """The tokenizer of a checkpoint folder or of a ``.gguf`` file (before its conversion), or
    None when it has none (images, audio): loading it costs milliseconds, unlike the weights. A
    GGUF's is built from its own vocabulary by the fast tokenizer class directly:
    ``AutoTokenizer`` would first parse the whole file for its config to pick a class, several
    times slower, and the class does not change the token count."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    folder = Path(folder)
    try:
        if folder.suffix.lower() == ".gguf" and folder.is_file():
            return PreTrainedTokenizerFast.from_pretrained(
                str(folder.parent), gguf_file=folder.name
            )
        return AutoTokenizer.from_pretrained(str(folder))
    except Exception:
        return None


def estimate_first_page(
    root: Path,
    device: str,
    parameters: int,
    tokenizer,
    corpus,
    max_length: int,
    batching: Batching | None = None,
    before: tuple[Phase, ...] = (),
    shape=None,
    calibrate: Callable[[Shape, int, int], float | None] | None = None,
) -> TimeEstimate | None:
    """The :class:`TimeEstimate` of ``corpus`` in ``batching`` (None: the default settings')
    after the phases ``before``; None for images and audio, or no tokenizer. ``shape`` (the
    model's :class:`isoscope.engine.budget.calibration.Shape`) and ``calibrate(shape, length,
    texts)`` (seconds per padded token in batches of ``texts`` texts of ``length`` tokens, the
    extraction's at the corpus's mean padded width) measure the rate where the device's
    records do not give it (:func:`isoscope.engine.budget.throughput.extraction_rate`)."""
    if tokenizer is None or getattr(corpus, "kind", "text") != "text":
        return None
    counts = token_counts(tokenizer, corpus.texts, max_length)
    batching = batching or Batching.of()
    padded = padded_tokens(counts, batching)
    length = round(padded / max(1, sum(1 for c in counts if c > 0)))  # a batch's mean width
    texts = batch_count(length, len(counts), batching.batch_size, batching.token_budget)
    measure = None if calibrate is None else (lambda s: calibrate(s, length, texts))
    rate = extraction_rate(root, device, parameters, shape, measure)
    seconds = None if rate is None else extraction_seconds(rate.per_unit, parameters, padded)
    basis = "" if rate is None else rate.basis
    shares = tuple(work_shares(counts, batching))
    return TimeEstimate(parameters, sum(counts), device, seconds, basis, before, shares)


def time_preflight(
    root: Path,
    device,
    corpus,
    max_length: int,
    show: Callable[[TimeEstimate], None],
    batching: Batching | None = None,
    calibrate: Callable[[Shape, str, int, int], float | None] | None = None,
) -> Callable[[int, Path], None]:
    """The ``on_preflight(parameters, folder)`` of :func:`isoscope.engine.load.models.load_model` that
    passes the :class:`TimeEstimate` of ``corpus`` on ``device`` (a torch device or its name) to
    ``show`` before the weights are downloaded or loaded (a GGUF's ``folder`` is the ``.gguf``
    file, before its conversion). ``calibrate(shape, device, length, texts)``: the short timed run
    that measures the model's width where the records do not
    (:func:`isoscope.engine.budget.calibration.calibrate`, the default)."""
    from isoscope.engine.budget import calibration
    from isoscope.engine.device import resolve_device

    torch_device = str(resolve_device(str(device)))
    key = device_key(torch_device)
    calibrate = calibration.calibrate if calibrate is None else calibrate

    def on_preflight(parameters: int, folder: Path) -> None:
        tokenizer = folder_tokenizer(folder)
        before = phases_before(root, key, parameters, folder)
        estimate = estimate_first_page(
            root,
            key,
            parameters,
            tokenizer,
            corpus,
            max_length,
            batching,
            before,
            calibration.folder_shape(folder),
            lambda shape, length, texts: calibrate(shape, torch_device, length, texts),
        )
        if estimate is not None:
            show(estimate)

    return on_preflight
