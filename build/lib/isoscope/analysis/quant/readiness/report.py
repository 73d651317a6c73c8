"""The report the CLI writes and the page draws: per-site rows, the end metric, the per-block
sensitivity and the verdict written from them (docs/methods.md section 10)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from isoscope.analysis.quant.params import (
    END_TOKENS,
    ERROR_TOKENS,
    KEEP_K,
    QUANT_BATCH_SIZE,
    QUANT_MAX_LENGTH,
    SMOOTHQUANT_ALPHA,
    check_keep_alpha,
)
from isoscope.analysis.quant.readiness.evaluation import alpha_sweep, best_alpha, evaluate, spearman
from isoscope.analysis.quant.readiness.scan import QuantScan, scan_sites
from isoscope.analysis.quant.schemes import SCHEME_LABELS, SCHEMES
from isoscope.analysis.quant.sites import ROLE_LABELS
from isoscope.engine.budget.progress import Progress, report

if TYPE_CHECKING:
    from isoscope.engine.inputs.pairs import SentencePairs


MIN_BOOTSTRAP_TEXTS = 8  # below this, resampling texts gives too few distinct means to trust


@dataclass(eq=False)
class QuantReport:
    """Everything the CLI writes and the page draws. ``errors[i]`` belongs to ``scan.sites[i]``;
    ``end`` and ``sensitivity`` may be None when not measured."""

    scan: QuantScan
    errors: list[dict[str, float]]
    end: dict | None
    sensitivity: list[dict] | None
    keep: int
    alpha: float
    outlier_dims: dict[int, tuple[int, ...]] | None = None
    interval: dict[str, list[float]] | None = None  # 95% bootstrap over the end texts
    alpha_sweep: list[dict] | None = None  # [{alpha, error}]: :func:`alpha_sweep`
    alpha_given: bool = True  # False: α is the sweep's best

    def alpha_reason(self) -> str:
        """Why this α, with the number behind it: the sweep's best, or the user's (and what the
        sweep would have chosen)."""
        if not self.alpha_sweep:
            return f"α = {self.alpha:g} as given"
        by_alpha = {r["alpha"]: r["error"] for r in self.alpha_sweep}
        best = best_alpha(self.alpha_sweep)
        grid = f"{min(by_alpha):g}–{max(by_alpha):g}"
        if not self.alpha_given:
            default = SMOOTHQUANT_ALPHA.default if SMOOTHQUANT_ALPHA.default in by_alpha else None
            than = (
                f" against {by_alpha[default]:.4g} at the paper's {default:g}"
                if default is not None and default != best
                else ""
            )
            return (
                f"α = {best:g}, the lowest mean per-site SmoothQuant error of the sweep over "
                f"{grid}: {by_alpha[best]:.4g}{than}"
            )
        if best == self.alpha:
            return f"α = {self.alpha:g} as given, also the sweep's best over {grid}: {by_alpha[best]:.4g}"
        return (
            f"α = {self.alpha:g} as given; the sweep over {grid} would choose {best:g}: mean per-site "
            f"error {by_alpha[best]:.4g} against {self.site_mean('smoothquant'):.4g} at {self.alpha:g}"
        )

    def site_mean(self, scheme: str) -> float:
        """The mean per-site error of ``scheme``."""
        return float(np.mean([e[scheme] for e in self.errors])) if self.errors else 0.0

    def overlapping(self) -> list[tuple[str, str]]:
        """Pairs of schemes whose end-metric intervals overlap (their order is not settled on
        these end texts), the better one first."""
        end = self.end
        if not self.interval or end is None:
            return []
        sign = 1.0 if self.metric == "kl" else -1.0
        ranked = sorted((k for k in SCHEMES if k in self.interval), key=lambda k: sign * end[k])
        return [
            (a, b)
            for i, a in enumerate(ranked)
            for b in ranked[i + 1 :]
            if self.interval[a][0] <= self.interval[b][1]
            and self.interval[b][0] <= self.interval[a][1]
        ]

    @property
    def metric(self) -> str | None:
        return None if self.end is None else self.end["metric"]

    def with_outlier_dims(self, result, by_state: list[list[int]] | None = None) -> QuantReport:
        """This report with the hidden-state outlier dims of the extraction ``result`` (see
        `outlier_dims_per_block`), so :meth:`site_rows` fills ``outlier_overlap``: the one
        way the page, the CLI and the report attach them."""
        return replace(self, outlier_dims=outlier_dims_per_block(result, by_state))

    def layer_error(self, scheme: str = "per_token") -> dict[int, float]:
        """Per block, the mean per-site error of ``scheme`` (the cheap proxy)."""
        by_layer: dict[int, list[float]] = {}
        for s, e in zip(self.scan.sites, self.errors, strict=True):
            by_layer.setdefault(s.site.layer, []).append(e[scheme])
        return {layer: float(np.mean(v)) for layer, v in sorted(by_layer.items())}

    def spearman_error_vs_end(self) -> float | None:
        if not self.sensitivity:
            return None
        proxy = self.layer_error("per_token")
        layers = [r["layer"] for r in self.sensitivity]
        # badness: KL grows with damage, cosine falls with it
        sign = 1.0 if self.metric == "kl" else -1.0
        return spearman([proxy[i] for i in layers], [sign * r["end"] for r in self.sensitivity])

    def site_rows(self) -> list[dict]:
        rows = []
        d = self.scan.hidden_size
        massive = set(self.scan.massive_dims)
        for s, e in zip(self.scan.sites, self.errors, strict=True):
            top = s.top()
            channels = [t["channel"] for t in top]
            residual = s.site.width == d  # channels are hidden dims only at width d
            outliers = (self.outlier_dims or {}).get(s.site.layer)
            rows.append(
                {
                    "modules": list(s.site.modules),
                    "layer": s.site.layer,
                    "role": s.site.role,
                    "width": s.site.width,
                    "max_abs": s.max_abs,
                    "median_abs": s.median_abs,
                    "max_over_median": s.max_over_median,
                    "kurtosis": s.kurtosis,
                    "share_gt_6": s.share_gt_6,
                    "top_channels": top,
                    "outlier_overlap": (
                        [c for c in channels if c in set(outliers)]
                        if residual and outliers is not None
                        else None
                    ),
                    "massive_overlap": [c for c in channels if c in massive] if residual else None,
                    "error": dict(e),
                }
            )
        return rows

    def loss_share(self, top: int = 2) -> tuple[list[int], float]:
        """The ``top`` most sensitive blocks and their share of the summed per-block loss."""
        if not self.sensitivity:
            return [], 0.0
        damage = np.array(
            [r["end"] if self.metric == "kl" else 1.0 - r["end"] for r in self.sensitivity]
        )
        damage = np.clip(damage, 0, None)
        if damage.sum() <= 0:
            return [], 0.0
        order = np.argsort(-damage)[:top]
        return [self.sensitivity[i]["layer"] for i in order], float(
            damage[order].sum() / damage.sum()
        )

    def verdict(self) -> str:
        """One or two sentences written from the numbers."""
        if self.end is None:
            worst = max(range(len(self.errors)), key=lambda i: self.errors[i]["per_token"])
            s = self.scan.sites[worst]
            return (
                f"The hardest site for per-token W8A8 is {s.site.modules[0]} "
                f"(relative error {self.errors[worst]['per_token']:.3f})."
            )
        end, name = self.end, self.metric
        fmt = (lambda v: f"KL {v:.3g}") if name == "kl" else (lambda v: f"1 − cosine {1 - v:.3g}")
        best = min(
            (k for k in SCHEMES if k in end),
            key=lambda k: end[k] if name == "kl" else -end[k],
        )
        parts = [
            f"Per-token W8A8 costs {fmt(end['per_token'])} (static per-tensor "
            f"{fmt(end['per_tensor'])}); keeping {self.keep} channels brings it to "
            f"{fmt(end['keep_k'])}, SmoothQuant (α = {self.alpha:g}) to {fmt(end['smoothquant'])}, "
            f"a Hadamard rotation to {fmt(end['rotation'])}; weight-only int4 costs "
            f"{fmt(end['w4_g128'])}. Best: {SCHEME_LABELS.get(best, best)}. SmoothQuant's "
            f"{self.alpha_reason()}."
        ]
        n_end = int(self.scan.end_ids.shape[0])
        close = [b for a, b in self.overlapping() if a == best]
        if self.interval and n_end < MIN_BOOTSTRAP_TEXTS:
            parts.append(
                f"The end metric ran on {n_end} text(s): too few for its bootstrap intervals to "
                "mean much (raise --end-tokens)."
            )
        elif close:
            parts.append(
                f"Its 95% interval (bootstrap over the {self.scan.end_ids.shape[0]} end texts) "
                f"overlaps {', '.join(SCHEME_LABELS.get(k, k) for k in close)}: on these texts "
                "that order is not settled (raise the end tokens to separate them)."
            )
        layers, share = self.loss_share()
        if layers:
            names = " and ".join(str(i) for i in layers)
            parts.append(f"Blocks {names} account for {share:.0%} of the per-block loss")
            rho = self.spearman_error_vs_end()
            if rho is not None:
                trust = "can" if rho >= 0.6 else "cannot"
                parts[-1] += (
                    f"; the per-site error ranks the blocks with Spearman {rho:.2f} against the "
                    f"measured loss, so the cheap proxy {trust} be trusted on this model."
                )
            else:
                parts[-1] += "."
        sts = end.get("sts_spearman")
        if sts:
            change = end["sts_spearman_change"]
            worst = min(change, key=change.get)
            parts.append(
                f"STS Spearman × 100 on {end['sts_pairs']['count']:,} pairs: "
                f"{sts['full_precision']:.1f} in full precision, {sts['per_token']:.1f} per token "
                f"({change['per_token']:+.1f}); the largest drop is "
                f"{SCHEME_LABELS.get(worst, worst)} ({change[worst]:+.1f})."
            )
        return " ".join(parts)

    def to_dict(self, model: dict | None = None, corpus: dict | None = None) -> dict:
        """The CLI's JSON (the keys docs/quantization.md lists)."""
        return {
            "model": model or {},
            "corpus": {
                **(corpus or {}),
                "texts": self.scan.n_texts,
                "tokens": self.scan.n_tokens,
                "max_length": self.scan.max_length,
                "error_tokens": self.scan.error_tokens,
                "end_texts": int(self.scan.end_ids.shape[0]),
                "end_tokens": self.scan.end_tokens,
            },
            "settings": {
                "keep": self.keep,
                "alpha": self.alpha,
                "alpha_given": self.alpha_given,
                "alpha_sweep": self.alpha_sweep,
            },
            "sites": self.site_rows(),
            "end": self.end,
            "sensitivity": self.sensitivity,
            "spearman_error_vs_end": self.spearman_error_vs_end(),
            "end_interval": self.interval,
            "massive_dims": list(self.scan.massive_dims),
            "verdict": self.verdict(),
            "notes": list(self.scan.notes),
        }


def analyse(
    loaded,
    texts: list[str] | tuple[str, ...],
    *,
    max_length: int = QUANT_MAX_LENGTH.default,
    batch_size: int = QUANT_BATCH_SIZE.default,
    keep: int = KEEP_K.default,
    alpha: float | None = None,
    error_tokens: int = ERROR_TOKENS.default,
    end_tokens: int = END_TOKENS.default,
    end: bool = True,
    sensitivity: bool = True,
    outlier_dims: dict[int, tuple[int, ...]] | None = None,
    pairs: SentencePairs | None = None,
    progress: Progress | None = None,
) -> QuantReport:
    """The whole analysis: :func:`scan_sites` then :func:`report_from` (``alpha`` None: the α
    sweep's best; ``pairs``: the encoder's STS change per scheme). ``progress`` gets one unit per
    batch of the pass, per scheme and one for the sensitivity runs."""
    check_keep_alpha(keep, SMOOTHQUANT_ALPHA.default if alpha is None else alpha)
    n_batches = math.ceil(len(texts) / max(1, batch_size))
    n_eval = len(SCHEMES) + (1 if sensitivity else 0)
    total = n_batches + n_eval

    def stage(offset: int):
        return lambda done, of: report(progress, offset + done, total)

    scan = scan_sites(
        loaded,
        texts,
        max_length=max_length,
        batch_size=batch_size,
        error_tokens=error_tokens,
        end_tokens=end_tokens,
        progress=stage(0),
    )
    return report_from(
        loaded,
        scan,
        keep=keep,
        alpha=alpha,
        end=end,
        sensitivity=sensitivity,
        outlier_dims=outlier_dims,
        pairs=pairs,
        batch_size=batch_size,
        progress=stage(n_batches),
    )


def report_from(
    loaded,
    scan: QuantScan,
    *,
    keep: int = KEEP_K.default,
    alpha: float | None = None,
    end: bool = True,
    sensitivity: bool = True,
    outlier_dims: dict[int, tuple[int, ...]] | None = None,
    pairs: SentencePairs | None = None,
    batch_size: int = 32,
    progress: Progress | None = None,
) -> QuantReport:
    """:func:`evaluate` a finished scan (the page re-evaluates one scan for new K and α) at
    ``alpha``, or (None) at the best α of :func:`alpha_sweep` on the same scan; the sweep is kept
    either way so the verdict can say what it would choose."""
    sweep = alpha_sweep(loaded, scan)
    given = alpha is not None
    alpha = float(alpha) if alpha is not None else best_alpha(sweep)
    ev = evaluate(
        loaded,
        scan,
        keep=keep,
        alpha=alpha,
        end=end,
        sensitivity=sensitivity,
        pairs=pairs,
        batch_size=batch_size,
        progress=progress,
    )
    return QuantReport(
        scan,
        ev.errors,
        ev.end,
        ev.sensitivity,
        int(keep),
        float(alpha),
        outlier_dims,
        ev.interval,
        alpha_sweep=sweep,
        alpha_given=given,
    )


def role_label(role: str) -> str:
    return ROLE_LABELS.get(role, role)


def outlier_dims_per_block(
    result, by_state: list[list[int]] | None = None
) -> dict[int, tuple[int, ...]]:
    """Hidden-state outlier dims (``isoscope.analysis.outliers.outlier_dims_by_state``,
    the headline rule) per block index: block ``i`` reads the hidden state ``i`` (0 = the
    embeddings). ``by_state``: that function's answer for ``result``, when already computed."""
    from isoscope.analysis.outliers import outlier_dims_by_state as headline_by_state

    dims = by_state if by_state is not None else headline_by_state(result)
    return {i: tuple(int(j) for j in dims[i]) for i in range(result.num_states - 1)}
