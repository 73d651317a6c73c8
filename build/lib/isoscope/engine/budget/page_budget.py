"""The first page's budget: what a prefix of the corpus costs (:class:`PageCost`) and the first
look that fits (:func:`plan_first_look`), from the speeds this cache recorded
(:mod:`isoscope.engine.budget.throughput`).

A *first look* (the Overview of a model that would take longer than :data:`FIRST_LOOK_SECONDS`)
is the longest prefix of the corpus whose estimated time fits the budget: a corpus of its own,
with its own hash and cache entry; the whole corpus is a second, separate entry. The budget is
the whole first page the user waits for: the model's load (measured,
``LoadedModel.load_seconds``), the page's frame (:data:`FRAME_SECONDS`), the extraction (the
measured rate, its fixed :data:`~isoscope.engine.budget.throughput.EXTRACTION_FIXED_S` included)
and the Overview's statistics on the extracted tokens (the measured rate,
:func:`isoscope.engine.budget.throughput.statistics_seconds_per_token`). A plan aims at
:data:`PLANNED_SHARE` of the budget.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from isoscope.engine.budget import throughput
from isoscope.engine.budget.batching import Batching, padded_tokens
from isoscope.engine.budget.estimates import describe_seconds

FIRST_LOOK_SECONDS = 60.0  # the "a first look within a minute"; $ISOSCOPE_FIRST_LOOK_S
BUDGET_ENV = "ISOSCOPE_FIRST_LOOK_S"
MIN_FIRST_LOOK_TEXTS = 8  # fewer texts than this make no useful statistics
MAX_FIRST_LOOKS = 256  # first-look lengths kept (the newest), one per model x corpus x settings
# The page around the sections (the app's frame, sidebar and imports on a fresh process): the
# part of a first page that is neither the load, the extraction nor the statistics
# (benchmarks/big_model.py; docs/performance.md).
FRAME_SECONDS = 3.5
# The share of the budget a first look plans to: the estimates are means, so a page planned to
# the whole budget overruns it about half the time (benchmarks/big_model.py; docs/performance.md).
PLANNED_SHARE = 0.9
FIRST_LOOKS_FILE = "first_looks.json"


def page_cost(loaded, root: Path, batching: Batching) -> PageCost | None:
    """The :class:`PageCost` of ``loaded`` on its device: its load and the frame, the
    extraction (the measured rate x parameters, per padded token) and the statistics
    (:func:`isoscope.engine.budget.throughput.statistics_seconds_per_token`); None before the
    extraction's first measurement."""
    parameters = throughput.parameter_count(loaded.model)
    rate = throughput.seconds_per_token_parameter(
        root,
        throughput.device_key(loaded.device),
        parameters,
        throughput.model_shape(loaded.model),  # its calibration before the load, if one ran
    )
    if rate is None:
        return None
    fixed = loaded.load_seconds + FRAME_SECONDS + throughput.extraction_seconds(rate, parameters, 0)
    return PageCost(
        fixed, rate * parameters, throughput.statistics_seconds_per_token(loaded, root), batching
    )


def first_look_budget() -> float:
    """The first look's seconds: ``$ISOSCOPE_FIRST_LOOK_S`` (a patient operator or a test
    raises it), else :data:`FIRST_LOOK_SECONDS`."""
    raw = os.environ.get(BUDGET_ENV, "").strip()
    try:
        return float(raw) if raw else FIRST_LOOK_SECONDS
    except ValueError:
        return FIRST_LOOK_SECONDS


@dataclass(frozen=True)
class PageCost:
    """The first page's seconds for a prefix of texts: ``fixed_s`` (the load and the frame) +
    ``per_padded`` x its padded tokens (the extraction) + ``per_token`` x its tokens (the
    statistics)."""

    fixed_s: float
    per_padded: float
    per_token: float
    batching: Batching

    def seconds(self, counts: Sequence[int]) -> float:
        padded = padded_tokens(counts, self.batching)
        return self.fixed_s + self.per_padded * padded + self.per_token * sum(counts)


def first_look_size(counts: Sequence[int], cost: PageCost, budget_s: float) -> int:
    """The number of leading texts whose page fits :data:`PLANNED_SHARE` of ``budget_s`` (all of
    them when the whole corpus fits; at least :data:`MIN_FIRST_LOOK_TEXTS`): a binary search,
    the cost growing with the prefix."""
    budget_s *= PLANNED_SHARE
    if cost.seconds(counts) <= budget_s:
        return len(counts)
    fits, over = 0, len(counts)  # seconds(counts[:fits]) <= budget_s < seconds(counts[:over])
    while over - fits > 1:
        middle = (fits + over) // 2
        if cost.seconds(counts[:middle]) <= budget_s:
            fits = middle
        else:
            over = middle
    return min(max(fits, MIN_FIRST_LOOK_TEXTS), len(counts))


@dataclass(frozen=True)
class FirstLook:
    """The prefix of a corpus that fits the budget, and the estimates behind the choice."""

    corpus: object  # the prefix: a Corpus of its own (its own hash and cache entry)
    texts: int
    total_texts: int
    full_seconds: float  # the whole corpus's page, estimated, beyond the load
    seconds: float  # this first look's page, estimated, the load included
    budget_s: float
    first_batch: bool = False  # sized by the speed of its own first batch (a device's first run)

    def describe(self) -> str:
        speed = (
            "measured on its first batch" if self.first_batch else "from its last measured speed"
        )
        return (
            f"first look: {self.texts:,} of {self.total_texts:,} texts "
            f"(the whole corpus would take {describe_seconds(self.full_seconds)} on this device, "
            f"{speed})"
        )


def plan_first_look(
    loaded,
    corpus,
    counts: Sequence[int],
    root: Path,
    budget_s: float | None = None,
    key: str | None = None,
    batching: Batching | None = None,
) -> FirstLook | None:
    """The first look at ``corpus`` (``counts``: its :func:`token_counts`) when its whole first
    page (the load, the extraction and the Overview's statistics: module doc) is estimated to
    take longer than ``budget_s`` (None: :func:`first_look_budget`) on ``loaded``'s device; None
    when it fits, is not text, or no speed has been measured on this device yet. The prefix
    already chosen for ``key`` (the whole corpus's cache key, :func:`remember_first_look`) is
    kept, so a newer measurement does not compute a second one. ``batching``: the extraction's
    (None: the default settings')."""
    budget_s = first_look_budget() if budget_s is None else budget_s
    if getattr(corpus, "kind", "text") != "text":
        return None
    cost = page_cost(loaded, root, batching or Batching.of())
    if cost is None:
        return None
    whole = cost.seconds(counts)
    kept = None if key is None else remembered_first_look(root, key)
    if kept is not None and kept < len(corpus):
        n = kept
    else:
        n = first_look_size(counts, cost, budget_s)
        if n >= len(corpus):
            return None
    prefix = prefix_corpus(corpus, n)
    seconds = cost.seconds(counts[:n])
    return FirstLook(prefix, n, len(corpus), whole - cost.fixed_s, seconds, budget_s)


def prefix_corpus(corpus, n: int):
    """The first ``n`` texts of ``corpus``: a corpus of its own (its own hash and cache entry)."""
    from isoscope.engine.inputs.corpus import Corpus

    return Corpus(corpus.texts[:n], f"{corpus.name} · first look, {n} of {len(corpus)} texts")


def remember_first_look(root: Path, key: str, n: int) -> None:
    """Keep the first look's length chosen for the whole corpus's cache ``key`` (best effort)."""
    path = Path(root) / FIRST_LOOKS_FILE
    kept = _read_first_looks(path)
    kept.pop(key, None)
    kept[key] = int(n)
    throughput.write_records(path, dict(list(kept.items())[-MAX_FIRST_LOOKS:]))


def remembered_first_look(root: Path, key: str) -> int | None:
    """The first look's length kept for ``key``, or None."""
    return _read_first_looks(Path(root) / FIRST_LOOKS_FILE).get(key)


def _read_first_looks(path: Path) -> dict[str, int]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): int(v) for k, v in data.items() if isinstance(v, int) and v > 0}
