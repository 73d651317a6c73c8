"""The recipe's ignore list (:mod:`isoscope.analysis.quant.recipe`): the modules kept in full
precision.

The most sensitive blocks are kept: the measured per-block end loss (each block alone W8A8 per
token; :func:`~isoscope.analysis.quant.readiness.layer_sensitivity`), most damaging first, until the
kept blocks account for ``ignore_share`` of the summed per-block loss
(:data:`~isoscope.analysis.quant.params.IGNORE_SHARE`), at most ``max_blocks``. Without a
sensitivity run the per-site error (the cheap proxy) ranks the blocks. ``lm_head`` is always kept
(isoscope's end metric keeps it in full precision, as llm-compressor's W8A8 examples do). Each
ignored module carries its reason, which the recipe's YAML writes as a comment beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

from isoscope.analysis.quant.params import IGNORE_SHARE
from isoscope.analysis.quant.readiness.report import QuantReport
from isoscope.engine.errors import InputError

MAX_BLOCKS = 4
HEAD = "lm_head"


@dataclass(frozen=True)
class Ignored:
    """A module kept in full precision: ``layer`` None for the output head."""

    module: str
    layer: int | None
    reason: str


def block_damage(report: QuantReport) -> tuple[dict[int, float], str]:
    """Per block, how much quantizing it alone hurts: the measured end loss (KL, or 1 - cosine)
    when the sensitivity ran, else the mean per-site per-token error (the proxy)."""
    if report.sensitivity:
        sign_kl = report.metric == "kl"
        return {
            r["layer"]: max(0.0, r["end"] if sign_kl else 1.0 - r["end"])
            for r in report.sensitivity
        }, "sensitivity"
    return report.layer_error("per_token"), "site error"


def check_ignore_rule(ignore_share: float, max_blocks: int) -> None:
    IGNORE_SHARE.check(float(ignore_share), IGNORE_SHARE.flag)
    if not 0 <= int(max_blocks) <= 4096:
        raise InputError(f"--ignore-max-blocks must be between 0 and 4096, got {max_blocks}")


def kept_blocks(
    damage: dict[int, float],
    ignore_share: float = IGNORE_SHARE.default,
    max_blocks: int = MAX_BLOCKS,
) -> tuple[list[dict], list[int]]:
    """Blocks most damaging first (``{layer, damage, share}``) and the ones to keep in full
    precision: the fewest whose shares reach ``ignore_share``, at most ``max_blocks`` (a block
    that does no damage is never kept)."""
    total = sum(damage.values())
    ranked = sorted(damage, key=lambda i: (-damage[i], i))
    rows: list[dict] = [
        {"layer": i, "damage": damage[i], "share": damage[i] / total if total > 0 else 0.0}
        for i in ranked
    ]
    kept: list[int] = []
    covered = 0.0
    for row in rows:
        if covered >= ignore_share - 1e-12 or len(kept) >= max_blocks or row["damage"] <= 0:
            break
        kept.append(row["layer"])
        covered += row["share"]
    return rows, kept


def ignore_list(
    report: QuantReport, ignore_share: float, max_blocks: int
) -> tuple[list[Ignored], list[dict], str]:
    """The modules kept in full precision (the output head, then every module of each kept block
    with its rank and share), the blocks most damaging first (:func:`kept_blocks`' rows) and what
    ranked them (:func:`block_damage`)."""
    damage, ranked_by = block_damage(report)
    rows, kept = kept_blocks(damage, ignore_share, max_blocks)
    total_share = {r["layer"]: r for r in rows}
    unit = "KL" if report.metric == "kl" else "1 − cosine" if report.metric else "per-site error"
    ignore = [
        Ignored(
            HEAD,
            None,
            "the output head: not measured here (the end metric keeps it in full precision)",
        )
    ]
    rank = {layer: k + 1 for k, layer in enumerate(r["layer"] for r in rows)}
    for s in report.scan.sites:
        if s.site.layer not in kept:
            continue
        row = total_share[s.site.layer]
        why = (
            f"block {s.site.layer}: rank {rank[s.site.layer]} of {len(rows)}, "
            f"{row['share']:.0%} of the summed per-block {unit} ({unit} {row['damage']:.3g} "
            f"with only this block W8A8, {ranked_by})"
        )
        ignore += [Ignored(m, s.site.layer, why) for m in s.site.modules]
    return ignore, rows, ranked_by
