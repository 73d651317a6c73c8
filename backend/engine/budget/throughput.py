"""How fast this device runs a model, measured, and what that predicts for the next corpus.

The rule: an extraction's time is a fixed part (:data:`EXTRACTION_FIXED_S`) plus a part
proportional to padded tokens x parameters (one forward pass costs about 2 FLOPs per parameter
per token, and a batch runs every text to its longest text's length; the rate is this device's,
measured, not assumed). The padded tokens are those of the
batches the extraction forms (:func:`padded_tokens`, the one batching rule); real tokens
underestimated a first look of 34 texts of a 1.5B decoder by half, because its one batch of 32
ran at the longest text's width. Every extraction through the disk cache records its measured
seconds per (padded token x parameter) for its device and parameter count in ``speeds.json`` in
the cache folder; the rate at the next run's size comes from those records by the one rule of
:mod:`backend.engine.budget.estimates` (the record at that size, else interpolated between sizes, else
extrapolated upward from smaller ones, and said which). Before a first measurement on a device
there is no estimate of the extraction: the first run measures on its first batch and stops at
the prefix that fits (:mod:`backend.engine.serve.firstlook`). The running progress bar refines it with
every batch (:func:`backend.engine.budget.progress.eta_seconds`).

What comes before the extraction is estimated the same way, each phase named
(:class:`TimeEstimate`): the download (per byte, kept for the network), a GGUF's conversion (per
parameter, kept for the CPU) and the load (per parameter, kept for the device; a 16-bit
checkpoint's, widened, apart), each from the
records of the loads this cache has seen (:func:`record_phases`), else a stated prior
(:data:`PHASE_PRIORS`).

A *first look* (the Overview of a model that would take longer than :data:`FIRST_LOOK_SECONDS`)
is the longest prefix of the corpus whose estimated time fits the budget: a corpus of its own,
with its own hash and cache entry; the whole corpus is a second, separate entry. The budget is
the whole first page the user waits for: the model's load (measured,
``LoadedModel.load_seconds``), the page's frame (:data:`FRAME_SECONDS`), the extraction (above,
its fixed :data:`EXTRACTION_FIXED_S` included)
and the Overview's statistics on the extracted tokens (outlier dims, anisotropy, the first
position, the quick findings), which cost about the same per token x hidden state x dim whatever
the model: measured by every Overview on this machine (:func:`record_statistics`), and
:data:`STATISTICS_PRIOR` before the first. A plan aims at :data:`PLANNED_SHARE` of the budget.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from backend.engine.budget.batching import Batching, padded_tokens
from backend.engine.budget.estimates import (
    PRIOR_BASIS,
    Rate,
    cache_knee,
    describe_seconds,
    growth_prior,
    phase_seconds,
    rate_for,
)
from backend.engine.jsonio import strict_json
from backend.engine.load.preflight import stored_bytes_per_parameter

FILE_NAME = "speeds.json"  # per padded token (throughput.json held rates per real token)
FIRST_LOOK_SECONDS = 60.0  # the "a first look within a minute"; $ISOSCOPE_FIRST_LOOK_S
BUDGET_ENV = "ISOSCOPE_FIRST_LOOK_S"
MIN_RECORD_SECONDS = 5.0  # shorter runs are not kept: fixed per-run costs would dominate them
MIN_FIRST_LOOK_TEXTS = 8  # fewer texts than this make no useful statistics
MAX_MODELS_PER_DEVICE = 32  # measurements kept per device (the newest)
MAX_FIRST_LOOKS = 256  # first-look lengths kept (the newest), one per model x corpus x settings
# Seconds per (sampled token x hidden state x dim) of the Overview's statistics before this
# machine has measured its own: a 0.5B Qwen2-shaped decoder's first look (2,536 and 2,862 tokens
# of 24 states x 1,024 dims: 10.0 and 10.8 s, 1.60e-7 and 1.54e-7) on the idle 2-core reference
# machine; benchmarks/big_model.py measures a page against its estimate.
STATISTICS_PRIOR = 1.6e-7
# The page around the sections (the app's frame, sidebar and imports on a fresh process): 3.5 s
# of that same page's 46.8 s was neither the load, the extraction nor the statistics.
FRAME_SECONDS = 3.5
# The share of the budget a first look plans to: the estimates are means, and a 1.5B decoder's
# pages took 1.01-1.07x their estimate (benchmarks/big_model.py), so a page planned to
# the whole budget overran it about half the time.
PLANNED_SHARE = 0.9
STATISTICS_KIND = "Overview statistics"  # what the statistics' rates are kept under, per device
# Seconds an extraction costs whatever its size (the statistics' kernels, the token sample's
# buffer, the first batch's warm-up). On the idle 2-core reference machine it is below what the
# ladder resolves: a 30 M parameter decoder's 96 texts took 1.2 s at a per-token rate lower than
# every larger model's (benchmarks/estimates.py), so no fixed part is taken out or added back. The
# rule keeps the term so that a device where it matters can be given one.
EXTRACTION_FIXED_S = 0.0
# A run shorter than MIN_RECORD_SECONDS is still kept when it did this much per-token work
# (parameters x padded tokens; about a second at the reference machine's ~1e-11 s): the smallest
# model of a ladder (a 30 M decoder's 96 texts: 1.6e11 in 1.2 s) is what the first run at a larger
# size extrapolates from, while a tiny model's run, mostly per-run overhead, is not kept (its rate
# would announce a big model many times too slow).
MIN_RECORD_WORK = 1e11
MIN_EXTRACTION_RECORD_S = 1.0
FIXED_LOAD_S = 2.0  # a 2 M parameter model's load in a fresh process (same machine)
FIXED_CONVERSION_S = 3.5  # a 2 M parameter GGUF's conversion (same machine)
# The phases before the extraction: (seconds per unit, fixed seconds) before the first record of
# this cache (:func:`backend.engine.budget.estimates.phase_seconds`).
DOWNLOAD, CONVERSION, LOAD = "download", "conversion", "load"
LOAD_16 = "load from 16-bit"  # a load that widens bf16/fp16 weights: its own records
PHASE_PRIORS = {
    # per byte: an assumed 10 MB/s (the Hub serves faster; a shared link often does not)
    DOWNLOAD: (1 / 10e6, 0.0),
    # per parameter: a 1.54 B Qwen2.5-Coder GGUF took about 25 s on the 2-core reference
    # machine; fixed: reading a small GGUF's vocabulary and config, writing its tokenizer
    CONVERSION: (1.6e-8, FIXED_CONVERSION_S),
    # per parameter: 1,497.6 M bf16 parameters loaded as float32 in 4.1 s on the idle 2-core
    # reference machine (benchmarks/big_model.py, 2026-12-02); fixed: a small model's load in a
    # fresh process (the model classes' imports, the tokenizer)
    LOAD_16: (2.7e-9, FIXED_LOAD_S),
    # weights loaded in the dtype they are stored in are mapped, not copied: an assumed third of
    # the widening's cost per parameter (a 199 M float32 checkpoint loaded in 2.4 s, all but
    # fixed costs, benchmarks/estimates.py)
    LOAD: (0.9e-9, FIXED_LOAD_S),
}
MIN_PHASE_SECONDS = 0.5  # shorter phases are not kept: timer noise


def device_key(device) -> str:
    """``cpu``, ``cuda:<name>`` or ``mps``: what a measurement is kept under."""
    text = str(device)
    if text.startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            return f"cuda:{torch.cuda.get_device_name(torch.device(text))}"
    return text.split(":")[0]


def parameter_count(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def _path(root: Path) -> Path:
    return Path(root) / FILE_NAME


def _read(root: Path) -> dict[str, dict[str, float]]:
    try:
        data = json.loads(_path(root).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(device): {str(n): float(r) for n, r in rates.items() if isinstance(r, int | float)}
        for device, rates in data.items()
        if isinstance(rates, dict)
    }


def record(
    root: Path,
    device: str,
    parameters: int,
    tokens: int,
    seconds: float,
    min_seconds: float = MIN_RECORD_SECONDS,
) -> None:
    """Keep this run's seconds per (token x parameter) for ``device`` and this parameter count
    (best effort: a read-only cache folder keeps nothing, and nothing fails). A run shorter than
    ``min_seconds`` is not kept: its time is mostly fixed costs (loading the first batch,
    warming kernels), and a model that fast needs no first look."""
    if parameters <= 0 or tokens <= 0 or seconds < min_seconds:
        return
    data = _read(root)
    rates = data.setdefault(device, {})
    rates.pop(str(parameters), None)  # re-inserted last: the newest measurements are kept
    rates[str(parameters)] = seconds / (tokens * parameters)
    data[device] = dict(list(rates.items())[-MAX_MODELS_PER_DEVICE:])
    _write(_path(root), data)


def record_extraction(
    root: Path, device: str, parameters: int, padded: int, seconds: float
) -> None:
    """Keep an extraction's rate per padded token x parameter net of :data:`EXTRACTION_FIXED_S`
    (at least half its seconds count as per-token work). A run under :data:`MIN_RECORD_SECONDS`
    is kept only with :data:`MIN_RECORD_WORK` or more parameters x padded tokens, and at least
    :data:`MIN_EXTRACTION_RECORD_S`."""
    enough_work = parameters * padded >= MIN_RECORD_WORK and seconds >= MIN_EXTRACTION_RECORD_S
    if seconds < MIN_RECORD_SECONDS and not enough_work:
        return
    net = max(seconds - EXTRACTION_FIXED_S, seconds / 2)
    record(root, device, parameters, padded, net, min_seconds=0.0)


def extraction_seconds(rate: float, parameters: int, padded: int) -> float:
    """The one extraction time: :data:`EXTRACTION_FIXED_S` + ``rate`` x parameters x padded
    tokens."""
    return EXTRACTION_FIXED_S + rate * parameters * padded


def _write(path: Path, data: dict) -> None:
    """Replace ``path`` with ``data`` as JSON, atomically; nothing on a read-only folder."""
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(strict_json(data, indent=1))
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError):  # a cache folder under a file: no tmp to remove
            tmp.unlink(missing_ok=True)


def _records(root: Path, key: str) -> dict[int, float]:
    return {int(n): r for n, r in _read(root).get(key, {}).items() if n.isdigit()}


def extraction_rate(root: Path, device: str, parameters: int) -> Rate | None:
    """The extraction's seconds per padded token x parameter on ``device`` at ``parameters``,
    from the device's records by :func:`backend.engine.budget.estimates.rate_for` (its cache knee and
    growth); None before the device's first measurement."""
    return rate_for(
        _records(root, device),
        parameters,
        knee=cache_knee(device),
        prior_growth=growth_prior(device),
    )


def seconds_per_token_parameter(root: Path, device: str, parameters: int) -> float | None:
    """The rate of :func:`extraction_rate` alone; None before the first measurement."""
    rate = extraction_rate(root, device, parameters)
    return None if rate is None else rate.per_unit


def speed_measured(loaded, root: Path) -> bool:
    """Whether ``loaded``'s device has a recorded speed (else its first run measures one)."""
    parameters = parameter_count(loaded.model)
    return seconds_per_token_parameter(root, device_key(loaded.device), parameters) is not None


STATISTICS_DEVICE = (
    f"cpu · {STATISTICS_KIND}"  # numpy on this machine's CPU, whatever the model's device
)


def statistics_units(loaded) -> int:
    """What the Overview's statistics scale with per token: hidden states x width."""
    return (loaded.info.num_layers + 1) * loaded.info.hidden_size


def record_statistics(root: Path, units: int, tokens: int, seconds: float) -> None:
    """Keep the seconds the Overview's statistics took on ``tokens`` sampled tokens of ``units``
    (hidden states x width) on this machine, as :func:`record` keeps an extraction's: a run under
    :data:`MIN_RECORD_SECONDS` (a page served from its caches) is not kept."""
    record(root, STATISTICS_DEVICE, units, tokens, seconds)


def statistics_seconds_per_token(loaded, root: Path) -> float:
    """The Overview statistics' seconds per token of ``loaded`` (this machine's measured rate
    at this size by :func:`backend.engine.budget.estimates.rate_for`, else :data:`STATISTICS_PRIOR`,
    x :func:`statistics_units`)."""
    units = statistics_units(loaded)
    measured = rate_for(_records(root, STATISTICS_DEVICE), units)
    return (STATISTICS_PRIOR if measured is None else measured.per_unit) * units


@dataclass(frozen=True)
class Phase:
    """One named phase of an estimate: its seconds and how its rate was obtained."""

    name: str
    seconds: float
    basis: str


def phase_key(phase: str, device: str) -> str:
    """What a phase's records are kept under: a download under the network, a GGUF conversion
    under the CPU (it runs there whatever the device), a load under its device."""
    owner = {DOWNLOAD: "network", CONVERSION: "cpu"}.get(phase, device)
    return f"{owner} · {phase}"


def phase_estimate(root: Path, phase: str, device: str, units: int) -> Phase:
    """``phase`` of ``units`` (bytes for a download, parameters otherwise) on ``device``: a fixed
    part and a part per unit, from the records (:func:`backend.engine.budget.estimates.phase_seconds`),
    else :data:`PHASE_PRIORS`."""
    per_unit, fixed = PHASE_PRIORS[phase]
    estimate = phase_seconds(_records(root, phase_key(phase, device)), units, per_unit, fixed)
    return Phase(LOAD if phase == LOAD_16 else phase, estimate.per_unit, estimate.basis)


def load_phase(folder: Path) -> str:
    """:data:`LOAD_16` for a checkpoint stored in 16 bits (widened on the CPU), else :data:`LOAD`;
    a ``.gguf`` file loads from its float32 copy."""
    if Path(folder).suffix.lower() == ".gguf":
        return LOAD
    return LOAD_16 if stored_bytes_per_parameter(folder) == 2 else LOAD


def record_phases(root: Path, loaded) -> None:
    """Keep the phases ``loaded``'s load measured (``LoadedModel.phases``: name, units,
    seconds), each under :func:`phase_key`; a phase under :data:`MIN_PHASE_SECONDS` is not kept."""
    phases = getattr(loaded, "phases", ())
    device = device_key(loaded.device) if phases else ""
    for name, units, seconds in phases:
        record(root, phase_key(name, device), units, 1, seconds, MIN_PHASE_SECONDS)


def record_download(root: Path, fetched_bytes: int, seconds: float) -> None:
    """Keep a download made outside :func:`backend.engine.load.models.load_model` (the UI's, with its
    bar) as :func:`record_phases` keeps a load's."""
    record(root, phase_key(DOWNLOAD, ""), fetched_bytes, 1, seconds, MIN_PHASE_SECONDS)


def phases_before(root: Path, device: str, parameters: int, folder: Path) -> tuple[Phase, ...]:
    """The phases before the extraction of the model at ``folder`` (``on_preflight``'s: a
    ``.gguf`` file before its conversion, a Hub snapshot before its weights, or a checkpoint
    folder): the download when the snapshot's weights are missing, the conversion when the
    GGUF has no converted copy yet, and the load."""
    folder = Path(folder)
    phases = []
    if folder.suffix.lower() == ".gguf" and folder.is_file():
        from backend.engine.load.gguf import is_converted

        if not is_converted(folder):
            phases.append(phase_estimate(root, CONVERSION, device, parameters))
    elif _download_pending(folder):
        size = parameters * stored_bytes_per_parameter(folder)
        phases.append(phase_estimate(root, DOWNLOAD, device, size))
    phases.append(phase_estimate(root, load_phase(folder), device, parameters))
    return tuple(phases)


def _download_pending(folder: Path) -> bool:
    """Whether ``folder`` is a Hub snapshot whose weights have not been downloaded yet."""
    from backend.engine.load.hub import hub_cache_dir, snapshot_complete

    try:
        in_hub = folder.resolve().is_relative_to(hub_cache_dir().resolve())
    except OSError:
        return False
    return in_hub and not snapshot_complete(folder)


def page_cost(loaded, root: Path, batching: Batching) -> PageCost | None:
    """The :class:`PageCost` of ``loaded`` on its device: its load and the frame, the
    extraction (the measured rate x parameters, per padded token) and the statistics
    (:func:`statistics_seconds_per_token`); None before the extraction's first measurement."""
    parameters = parameter_count(loaded.model)
    rate = seconds_per_token_parameter(root, device_key(loaded.device), parameters)
    if rate is None:
        return None
    fixed = loaded.load_seconds + FRAME_SECONDS + extraction_seconds(rate, parameters, 0)
    return PageCost(fixed, rate * parameters, statistics_seconds_per_token(loaded, root), batching)


def estimate_seconds(root: Path, device: str, parameters: int, tokens: int) -> float | None:
    """Estimated extraction time of ``tokens`` through ``parameters`` on ``device``."""
    rate = seconds_per_token_parameter(root, device, parameters)
    return None if rate is None else extraction_seconds(rate, parameters, tokens)


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


def token_counts(tokenizer, texts: Sequence[str], max_length: int) -> list[int]:
    """Tokens per text as the extraction reads them (truncated at ``max_length``)."""
    encoded = tokenizer(list(texts), truncation=True, max_length=max_length)
    return [len(ids) for ids in encoded["input_ids"]]


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
        if total is None:
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
    GGUF's is built from its own vocabulary by the fast tokenizer class directly (0.4-0.6 s on
    the bundled SmolLM2): ``AutoTokenizer`` would first parse the whole file for its config to
    pick a class (4-9 s), and the class does not change the token count."""
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
) -> TimeEstimate | None:
    """The :class:`TimeEstimate` of ``corpus`` in ``batching`` (None: the default settings')
    after the phases ``before``; None for images and audio, or no tokenizer."""
    if tokenizer is None or getattr(corpus, "kind", "text") != "text":
        return None
    counts = token_counts(tokenizer, corpus.texts, max_length)
    padded = padded_tokens(counts, batching or Batching.of())
    rate = extraction_rate(root, device, parameters)
    seconds = None if rate is None else extraction_seconds(rate.per_unit, parameters, padded)
    basis = "" if rate is None else rate.basis
    return TimeEstimate(parameters, sum(counts), device, seconds, basis, before)


def time_preflight(
    root: Path,
    device,
    corpus,
    max_length: int,
    show: Callable[[TimeEstimate], None],
    batching: Batching | None = None,
) -> Callable[[int, Path], None]:
    """The ``on_preflight(parameters, folder)`` of :func:`backend.engine.load.models.load_model` that
    passes the :class:`TimeEstimate` of ``corpus`` on ``device`` (a torch device or its name) to
    ``show`` before the weights are downloaded or loaded (a GGUF's ``folder`` is the ``.gguf``
    file, before its conversion)."""
    from backend.engine.device import resolve_device

    key = device_key(resolve_device(str(device)))

    def on_preflight(parameters: int, folder: Path) -> None:
        tokenizer = folder_tokenizer(folder)
        before = phases_before(root, key, parameters, folder)
        estimate = estimate_first_page(
            root, key, parameters, tokenizer, corpus, max_length, batching, before
        )
        if estimate is not None:
            show(estimate)

    return on_preflight


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
    from backend.engine.inputs.corpus import Corpus

    return Corpus(corpus.texts[:n], f"{corpus.name} · first look, {n} of {len(corpus)} texts")


FIRST_LOOKS_FILE = "first_looks.json"


def remember_first_look(root: Path, key: str, n: int) -> None:
    """Keep the first look's length chosen for the whole corpus's cache ``key`` (best effort)."""
    path = Path(root) / FIRST_LOOKS_FILE
    kept = _read_first_looks(path)
    kept.pop(key, None)
    kept[key] = int(n)
    _write(path, dict(list(kept.items())[-MAX_FIRST_LOOKS:]))


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
