"""How fast this device runs a model, measured and kept beside the cache, and the rate that
predicts at a size.

The rule: an extraction's time is a fixed part (:data:`EXTRACTION_FIXED_S`) plus a part
proportional to padded tokens x parameters (one forward pass costs about 2 FLOPs per parameter
per token, and a batch runs every text to its longest text's length; the rate is this device's,
measured, not assumed). The padded tokens are those of the
batches the extraction forms (:func:`isoscope.engine.budget.batching.padded_tokens`, the one batching rule); real tokens
underestimated a first look of 34 texts of a 1.5B decoder by half, because its one batch of 32
ran at the longest text's width. Every extraction through the disk cache records its measured
seconds per (padded token x parameter) for its device and parameter count in ``speeds.json`` in
the cache folder; the rate at the next run's size comes from those records by the one rule of
:mod:`isoscope.engine.budget.estimates` (the record at that size, else interpolated between sizes, else
extrapolated upward from smaller ones, and said which). Before a first measurement on a device
there is no estimate of the extraction: the first run measures on its first batch and stops at
the prefix that fits (:mod:`isoscope.engine.serve.firstlook`). The running progress bar refines it with
every batch (:func:`isoscope.engine.budget.progress.eta_seconds`).

What comes before the extraction is estimated the same way, each phase named
(:class:`isoscope.engine.budget.time_estimate.TimeEstimate`): the download (per byte, kept for
the network), a GGUF's conversion (per parameter, kept for the CPU) and the load (per
parameter, kept for the device; a 16-bit checkpoint's, widened, apart), each from the records
of the loads this cache has seen (:func:`record_phases`), else a stated prior
(:data:`PHASE_PRIORS`).

The Overview's statistics on the extracted tokens (outlier dims, anisotropy, the first position,
the quick findings) cost about the same per token x hidden state x dim whatever the model: every
Overview on this machine records them (:func:`record_statistics`), and :data:`STATISTICS_PRIOR`
stands in before the first. What the records predict is read elsewhere: the first page's time
before the load (:mod:`isoscope.engine.budget.time_estimate`) and the first look's prefix
(:mod:`isoscope.engine.budget.page_budget`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from isoscope.engine.budget.estimates import (
    Rate,
    cache_knee,
    growth_prior,
    phase_seconds,
    rate_for,
)
from isoscope.engine.jsonio import strict_json
from isoscope.engine.load.preflight import stored_bytes_per_parameter

if TYPE_CHECKING:
    from isoscope.engine.budget.calibration import Shape

FILE_NAME = "speeds.json"  # per padded token (throughput.json held rates per real token)
MIN_RECORD_SECONDS = 5.0  # shorter runs are not kept: fixed per-run costs would dominate them
MAX_MODELS_PER_DEVICE = 32  # measurements kept per device (the newest)
# Seconds per (sampled token x hidden state x dim) of the Overview's statistics before this
# machine has measured its own: a 0.5B Qwen2-shaped decoder's first look on the reference
# machine (docs/performance.md); benchmarks/big_model.py measures a page against its estimate.
STATISTICS_PRIOR = 1.6e-7
STATISTICS_KIND = "Overview statistics"  # what the statistics' rates are kept under, per device
CALIBRATION_KIND = "extraction calibration"  # shape -> seconds per padded token, per device
# Seconds an extraction costs whatever its size (the statistics' kernels, the token sample's
# buffer, the first batch's warm-up). On the reference machine it is below what the ladder of
# benchmarks/estimates.py resolves (its smallest model runs at a per-token rate lower than every
# larger model's), so no fixed part is taken out or added back. The rule keeps the term so that a
# device where it matters can be given one.
EXTRACTION_FIXED_S = 0.0
# A run shorter than MIN_RECORD_SECONDS is still kept when it did this much per-token work
# (parameters x padded tokens; about a second's work on a CPU): the smallest
# model of a ladder (a 30 M decoder's 96 texts of 64 tokens) is what the first run at a larger
# size extrapolates from, while a tiny model's run, mostly per-run overhead, is not kept (its rate
# would announce a big model many times too slow).
MIN_RECORD_WORK = 1e11
MIN_EXTRACTION_RECORD_S = 1.0
FIXED_LOAD_S = 2.0  # a 2 M parameter model's load in a fresh process (the reference machine)
FIXED_CONVERSION_S = 3.5  # a 2 M parameter GGUF's conversion (the reference machine)
# The phases before the extraction: (seconds per unit, fixed seconds) before the first record of
# this cache (:func:`isoscope.engine.budget.estimates.phase_seconds`).
DOWNLOAD, CONVERSION, LOAD = "download", "conversion", "load"
LOAD_16 = "load from 16-bit"  # a load that widens bf16/fp16 weights: its own records
PHASE_PRIORS = {
    # per byte: an assumed 10 MB/s (the Hub serves faster; a shared link often does not)
    DOWNLOAD: (1 / 10e6, 0.0),
    # per parameter: a 1.54 B Qwen2.5-Coder GGUF's conversion on the reference machine
    # (docs/performance.md); fixed: reading a small GGUF's vocabulary and config, writing its
    # tokenizer
    CONVERSION: (1.6e-8, FIXED_CONVERSION_S),
    # per parameter: a 1.5 B bf16 checkpoint loaded as float32 on the reference machine
    # (benchmarks/big_model.py; docs/performance.md); fixed: a small model's load in a fresh
    # process (the model classes' imports, the tokenizer)
    LOAD_16: (2.7e-9, FIXED_LOAD_S),
    # weights loaded in the dtype they are stored in are mapped, not copied: an assumed third of
    # the widening's cost per parameter (a float32 checkpoint's load is mostly fixed costs,
    # benchmarks/estimates.py)
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
    write_records(_path(root), data)


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


def write_records(path: Path, data: dict) -> None:
    """Replace ``path`` (records kept beside the cache) with ``data`` as JSON, atomically; nothing
    on a read-only folder."""
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


def calibration_key(device: str) -> str:
    """What a device's calibrations are kept under (shape -> seconds per padded token)."""
    return f"{device} · {CALIBRATION_KIND}"


def calibrated_seconds(root: Path, device: str, shape_key: str) -> float | None:
    """The kept calibration of ``shape_key`` on ``device``: the whole model's seconds per
    padded token (:mod:`isoscope.engine.budget.calibration`), or None."""
    return _read(root).get(calibration_key(device), {}).get(shape_key)


def record_calibration(root: Path, device: str, shape_key: str, seconds_per_token: float) -> None:
    """Keep a calibration (best effort, as :func:`record` keeps a run), the newest
    :data:`MAX_MODELS_PER_DEVICE` shapes per device."""
    if not seconds_per_token > 0:
        return
    data = _read(root)
    kept = data.setdefault(calibration_key(device), {})
    kept.pop(shape_key, None)
    kept[shape_key] = float(seconds_per_token)
    data[calibration_key(device)] = dict(list(kept.items())[-MAX_MODELS_PER_DEVICE:])
    write_records(_path(root), data)


def extraction_rate(
    root: Path,
    device: str,
    parameters: int,
    shape=None,
    calibrate: Callable[[Shape], float | None] | None = None,
) -> Rate | None:
    """The extraction's seconds per padded token x parameter on ``device`` at ``parameters``,
    from the device's records by :func:`isoscope.engine.budget.estimates.rate_for` (its cache knee and
    growth); None before the device's first measurement. With ``shape`` (a
    :class:`isoscope.engine.budget.calibration.Shape`), where the records do not give the growth
    the rate is the shape's calibration on this device: the kept one, else ``calibrate(shape)``
    (seconds per padded token, then kept; None: not measured), so a shape is measured once."""

    def calibrated() -> Rate | None:
        if shape is None:
            return None
        seconds = calibrated_seconds(root, device, shape.key)
        if seconds is None and calibrate is not None:
            seconds = calibrate(shape)
            if seconds is not None:
                record_calibration(root, device, shape.key, seconds)
        return None if seconds is None else Rate(seconds / parameters, shape.basis)

    return rate_for(
        _records(root, device),
        parameters,
        knee=cache_knee(device),
        prior_growth=growth_prior(device),
        calibrated=calibrated,
    )


def seconds_per_token_parameter(
    root: Path, device: str, parameters: int, shape=None
) -> float | None:
    """The rate of :func:`extraction_rate` alone (a kept calibration of ``shape`` counts, none
    is run); None before the first measurement."""
    rate = extraction_rate(root, device, parameters, shape)
    return None if rate is None else rate.per_unit


def model_shape(model):
    """The :class:`isoscope.engine.budget.calibration.Shape` of a loaded model (its config), or
    None: what its kept calibration is found under."""
    from isoscope.engine.budget.calibration import shape_of_config

    return shape_of_config(getattr(model, "config", None))


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
    at this size by :func:`isoscope.engine.budget.estimates.rate_for`, else :data:`STATISTICS_PRIOR`,
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
    part and a part per unit, from the records (:func:`isoscope.engine.budget.estimates.phase_seconds`),
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
    """Keep a download made outside :func:`isoscope.engine.load.models.load_model` (the UI's, with its
    bar) as :func:`record_phases` keeps a load's."""
    record(root, phase_key(DOWNLOAD, ""), fetched_bytes, 1, seconds, MIN_PHASE_SECONDS)


def estimate_seconds(
    root: Path, device: str, parameters: int, tokens: int, shape=None
) -> float | None:
    """Estimated extraction time of ``tokens`` through ``parameters`` on ``device`` (with
    ``shape``, its kept calibration where the records do not give the growth)."""
    rate = seconds_per_token_parameter(root, device, parameters, shape)
    return None if rate is None else extraction_seconds(rate, parameters, tokens)


def token_counts(tokenizer, texts: Sequence[str], max_length: int) -> list[int]:
    """Tokens per text as the extraction reads them (truncated at ``max_length``)."""
    encoded = tokenizer(list(texts), truncation=True, max_length=max_length)
    return [len(ids) for ids in encoded["input_ids"]]
