"""Whether the recipe (:mod:`isoscope.analysis.quant.recipe`) rotates: llm-compressor's
``QuIPModifier``, input side ``v``, Hadamard blocks (QuIP#, Tseng et al. 2024, arXiv 2402.04396;
isoscope's ``rotation`` scheme is the same online ``x H``, ``W H``).

A rotation replaces SmoothQuant only when the measured end metric of the rotation is better than
both per-token W8A8 and SmoothQuant with 95% intervals that do not overlap theirs: on overlapping
intervals the order is not settled, and rotation hurts some models (SpinQuant #33, QuaRot #27,
auto-round #1797). The reason, with the numbers behind it, goes into the recipe's YAML as a
comment.
"""

from __future__ import annotations

from dataclasses import dataclass

from isoscope.analysis.quant.readiness.report import MIN_BOOTSTRAP_TEXTS, QuantReport
from isoscope.analysis.quant.schemes import SCHEME_LABELS, hadamard_block


@dataclass(frozen=True)
class Rotation:
    """The rotation decision: ``written`` when the recipe rotates (``QuIPModifier`` in place of
    SmoothQuant), ``reason`` with the numbers behind it, ``block_size`` the Hadamard block."""

    written: bool
    verdict: str  # "helps", "hurts" or "not settled"
    reason: str
    block_size: int


def rotation_decision(report: QuantReport) -> Rotation | None:
    """Whether the recipe rotates (see the module docstring), from the report's end metric and
    its 95% bootstrap intervals; None without an end metric."""
    end, interval = report.end, report.interval
    if end is None or not report.scan.sites:
        return None
    blocks = sorted({hadamard_block(s.site.width) for s in report.scan.sites})
    block = blocks[0]  # llm-compressor takes one block size; it must divide every width
    kl = report.metric == "kl"
    unit = "KL" if kl else "cosine"

    def shown(k: str) -> str:
        span = f" [{interval[k][0]:.3g}–{interval[k][1]:.3g}]" if interval else ""
        return f"{SCHEME_LABELS[k]} {unit} {end[k]:.3g}{span}"

    def clear(a: str, b: str) -> bool:  # a's interval entirely better than b's
        assert interval is not None  # asked only once the intervals are known
        return interval[a][1] < interval[b][0] if kl else interval[a][0] > interval[b][1]

    rivals = ("per_token", "smoothquant")
    said = f"{shown('rotation')} against {shown('per_token')} and {shown('smoothquant')}"
    n_end = int(report.scan.end_ids.shape[0])
    blocks_note = (
        f" (isoscope simulated Hadamard blocks of {', '.join(map(str, blocks))} by width; "
        f"llm-compressor takes one block size for every layer, {block})"
        if len(blocks) > 1
        else ""
    )
    if not interval or n_end < MIN_BOOTSTRAP_TEXTS:
        return Rotation(
            False,
            "not settled",
            f"no rotation: {said}, on {n_end} end text(s), too few for intervals that settle "
            "the order (raise --end-tokens).",
            block,
        )
    if all(clear("rotation", k) for k in rivals):
        return Rotation(
            True,
            "helps",
            f"a Hadamard rotation helps this model: {said}, 95% intervals clear of both, so the "
            f"recipe rotates (QuIPModifier, input side) instead of smoothing{blocks_note}.",
            block,
        )
    if any(clear(k, "rotation") for k in rivals):
        return Rotation(
            False,
            "hurts",
            f"a Hadamard rotation hurts this model: {said}, 95% intervals clear, so the recipe "
            "leaves it out.",
            block,
        )
    return Rotation(
        False,
        "not settled",
        f"no rotation: {said}; the 95% intervals overlap, so it is not clearly better on these "
        "texts and the recipe leaves it out.",
        block,
    )
