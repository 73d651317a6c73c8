"""One rule from a device's recorded speeds to the speed at a size it may not have run yet.

A device keeps one rate per size it has run (seconds per padded token x parameter for an
extraction, per parameter for a load or a GGUF conversion, per byte for a download;
:mod:`isoscope.engine.budget.throughput`). The rate is not constant in size: on a CPU a small model's
rate is inflated by fixed per-batch costs, and once the weights no longer fit the last-level
cache every batch streams them from memory, so the rate falls and then grows with size
(docs/performance.md, "Estimates at a size the device has not run"). So
:func:`rate_for` reads the records as a curve of log rate over log size:

- a record within :data:`SAME_SIZE` of the size is used as it is ("measured at this size");
- between two records, the rate is interpolated linearly in log size and log rate (monotone
  between them, exact at both);
- below the smallest record, that record's rate (the nearest size's fixed costs, an upper bound);
- above the largest, extrapolated upward: beyond ``knee`` (the size whose weights fill the
  last-level cache, :func:`cache_knee`) the rate grows as ``size ** growth``, fitted through
  the records above the knee (their mean in log rate, so one slow run moves the estimate by
  its share only; the largest record alone when none is above the knee), where ``growth`` is
  the slope of those records when they span :data:`MIN_FIT_SPAN` in size (closer records give
  a slope that a single slow run can double), else ``prior_growth`` (:data:`CPU_GROWTH_PRIOR`
  on a CPU; 0 on a GPU, where a bigger model fills more of its cores), in [0,
  :data:`MAX_GROWTH`]: never falling with size.

A phase before the extraction (a download, a GGUF conversion, a load) costs a fixed part (imports,
the tokenizer, the config, opening the files) plus a part per byte or parameter, so
:func:`phase_seconds` reads its records (size -> seconds per unit) as points of seconds over size
on a line: a record at the size is used as it is; between two records the seconds are
interpolated; above the largest, the line through the two largest records (never less steep
than the prior's per-unit part); with one record, the prior's per-unit part and that record's
own fixed part (the record's own per-unit part when it is faster than the prior); with none,
the prior.

Every estimate says how it was obtained ("measured at this size", "from 3 smaller models"...).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SAME_SIZE = 1.15  # sizes within 15% of a record count as that record's size
# The slope of log rate over log size beyond the cache knee on a CPU before a device's records
# there span a decade (benchmarks/estimates.py fits it; docs/performance.md). A small positive
# slope keeps the extrapolation upward (conservative) without announcing a model several times
# larger than the device has run at twice its time.
CPU_GROWTH_PRIOR = 0.1
MAX_GROWTH = 1.0  # a rate growing faster than the size itself would be a measurement gone wrong
MIN_FIT_SPAN = 10.0  # the records above the knee fit the device's own growth over a decade
FLOAT32_BYTES = 4  # a parameter in the cache on the CPU (isoscope computes in float32 there)


@dataclass(frozen=True)
class Rate:
    """Seconds per unit at one size, and how it was obtained (``basis``, for the estimate's
    wording: "measured at this size", "from 3 smaller models", ...)."""

    per_unit: float
    basis: str


def describe_seconds(seconds: float) -> str:
    """``about 40 s``, ``about 3 min``: an estimate as every line says it."""
    return f"about {seconds / 60:.0f} min" if seconds >= 120 else f"about {seconds:.0f} s"


def size_label(size: int) -> str:
    """``120 M``, ``1.5 B``: a size as a record names it."""
    return f"{size / 1e9:.1f} B" if size >= 10**9 else f"{size / 1e6:,.0f} M"


def _interpolate(low: tuple[int, float], high: tuple[int, float], size: int) -> float:
    (n0, r0), (n1, r1) = low, high
    t = math.log(size / n0) / math.log(n1 / n0)
    return math.exp(math.log(r0) + t * (math.log(r1) - math.log(r0)))


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log rate over log size."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(r) for _, r in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def rate_for(
    records: Mapping[int, float],
    size: int,
    *,
    knee: int = 0,
    prior_growth: float = 0.0,
    calibrated: Callable[[], Rate | None] | None = None,
) -> Rate | None:
    """The rate at ``size`` from ``records`` (size -> seconds per unit) by the module's rule;
    None without a record (a device's first run measures its first batch, and the default
    model's first page waits for no calibration). ``calibrated()`` (a rate measured on this
    device at this size's shape, :mod:`isoscope.engine.budget.calibration`) replaces the prior's
    growth: it is called only when ``size`` is above every record and the records do not span
    :data:`MIN_FIT_SPAN`; the prior stands only when it gives None."""
    points = sorted((int(n), float(r)) for n, r in records.items() if n > 0 and r > 0)
    if not points or size <= 0:
        return None
    nearest = min(points, key=lambda p: abs(math.log(p[0] / size)))
    if abs(math.log(nearest[0] / size)) <= math.log(SAME_SIZE):
        return Rate(nearest[1], "measured at this size")
    smaller = [p for p in points if p[0] < size]
    larger = [p for p in points if p[0] > size]
    if smaller and larger:
        low, high = smaller[-1], larger[0]
        return Rate(
            _interpolate(low, high, size),
            f"between the measured {size_label(low[0])} and {size_label(high[0])}",
        )
    if larger:
        return Rate(larger[0][1], f"from a larger model ({size_label(larger[0][0])})")
    above = [p for p in smaller if p[0] >= knee] or smaller[-1:]
    spans = len(above) >= 2 and above[-1][0] >= MIN_FIT_SPAN * above[0][0]
    if not spans and calibrated is not None:
        measured = calibrated()
        if measured is not None:
            return measured
    growth = slope(above) if spans else prior_growth
    growth = min(max(growth, 0.0), MAX_GROWTH)
    # log rate = c + growth x log size, c the mean over the records (one slow run moves it by
    # its share only); growth counts from the knee for a record inside the cache
    logs = [math.log(r) - growth * math.log(max(n, knee)) for n, r in above]
    per_unit = math.exp(sum(logs) / len(logs) + growth * math.log(max(size, knee)))
    factor = per_unit / above[-1][1]
    models = "1 smaller model" if len(smaller) == 1 else f"{len(smaller)} smaller models"
    # the growth is this device's own when its records span the sizes, else the prior's
    basis = f"from this machine's records of {len(smaller)} models" if spans else f"from {models}"
    if abs(factor - 1.0) >= 0.05:
        basis += f", x{factor:.1f} of the largest's rate for the size"
    return Rate(per_unit, basis)


@cache
def _cpu_cache_bytes() -> int:
    """The largest CPU cache the system reports (the last level), 0 when it says nothing."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = path.read_text().strip().upper()
        except OSError:
            continue
        factor = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * factor)
    return max(sizes, default=0)


def cache_knee(device: str) -> int:
    """Parameters whose float32 weights fill ``device``'s last-level cache (a CPU's largest
    cache, a GPU's L2); 0 when unknown (the growth then starts at the largest record)."""
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return 0
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return int(getattr(props, "L2_cache_size", 0)) // FLOAT32_BYTES
    if device == "cpu":
        return _cpu_cache_bytes() // FLOAT32_BYTES
    return 0


def growth_prior(device: str) -> float:
    """The rate's growth beyond the knee before ``device`` has measured its own."""
    return CPU_GROWTH_PRIOR if device == "cpu" else 0.0


PRIOR_BASIS = "a prior speed"


def phase_seconds(
    records: Mapping[int, float], size: int, prior_per_unit: float, prior_fixed: float
) -> Rate:
    """Seconds of a phase of ``size`` units (a :class:`Rate` whose ``per_unit`` is the whole
    phase's seconds) from ``records`` (size -> seconds per unit) by the module's line rule."""
    points = sorted((int(n), float(r) * int(n)) for n, r in records.items() if n > 0 and r > 0)
    if not points:
        return Rate(prior_fixed + prior_per_unit * size, PRIOR_BASIS)
    nearest = min(points, key=lambda p: abs(math.log(p[0] / max(size, 1))))
    if abs(math.log(nearest[0] / max(size, 1))) <= math.log(SAME_SIZE):
        return Rate(nearest[1], "measured at this size")
    if len(points) == 1:
        n1, s1 = points[0]
        per_unit = min(prior_per_unit, s1 / n1)
        side = "smaller" if n1 < size else "larger"
        return Rate(s1 + per_unit * (size - n1), f"from 1 {side} model")
    smaller = [p for p in points if p[0] < size]
    larger = [p for p in points if p[0] > size]
    if smaller and larger:
        (n0, s0), (n1, s1) = smaller[-1], larger[0]
        seconds = s0 + (s1 - s0) * (size - n0) / (n1 - n0)
        return Rate(seconds, f"between the measured {size_label(n0)} and {size_label(n1)}")
    if larger:
        return Rate(larger[0][1], f"from a larger model ({size_label(larger[0][0])})")
    (n0, s0), (n1, s1) = smaller[-2], smaller[-1]
    per_unit = max((s1 - s0) / (n1 - n0), prior_per_unit)  # never below the prior's per unit
    return Rate(s1 + per_unit * (size - n1), f"from {len(smaller)} smaller models")
