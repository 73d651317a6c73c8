"""From diagnosis to a quantized checkpoint: an llm-compressor recipe (YAML) and a plain JSON of
the same decisions, written from what isoscope measured (docs/methods.md section 10; docs/quantization.md).

- **SmoothQuant mappings** (Xiao et al. 2023, arXiv 2211.10438) come from the model's own wiring:
  every norm whose fold is exact, with every projection it feeds (:mod:`isoscope.analysis.quant.mappings`).
- **The ignore list** keeps the most sensitive blocks and ``lm_head`` in full precision, each
  ignored module's reason a YAML comment beside it (:mod:`isoscope.analysis.quant.ignore_list`).
- **The scheme** is llm-compressor's ``W8A8`` preset: int8 weights per output channel and int8
  activations per token, dynamic, symmetric: isoscope's ``per_token`` scheme.
- **α** is the report's: the α sweep's best on the scan unless the user gave one.
- **A rotation** (llm-compressor's ``QuIPModifier``) replaces SmoothQuant only when its measured end
  metric is clearly better than both rivals' (:mod:`isoscope.analysis.quant.rotation`). The YAML
  says why or why not in a comment.

The recipe's format is llm-compressor's (``Recipe.from_dict``): ``<name>_stage`` ->
``<name>_modifiers`` -> ``{ModifierName: arguments}``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import cast

import torch

from isoscope.analysis.quant.ignore_list import (
    HEAD,
    MAX_BLOCKS,
    Ignored,
    check_ignore_rule,
    ignore_list,
)
from isoscope.analysis.quant.mappings import (
    Mapping,
    Skipped,
    matches,
    norm_mappings,
    regex_mappings,
)
from isoscope.analysis.quant.params import IGNORE_SHARE
from isoscope.analysis.quant.readiness.report import QuantReport
from isoscope.analysis.quant.rotation import Rotation, rotation_decision
from isoscope.analysis.quant.sites import name_prefix

SCHEME = "W8A8"
LLMCOMPRESSOR = "https://github.com/vllm-project/llm-compressor"


@dataclass(frozen=True)
class Recipe:
    """The decisions: scheme, α, SmoothQuant mappings, modules kept in full precision. ``regex``:
    the mappings in llm-compressor's form, ``[[balance targets], smooth target]``."""

    model: str
    alpha: float
    mappings: tuple[Mapping, ...]
    skipped: tuple[Skipped, ...]
    ignore: tuple[Ignored, ...]
    regex: tuple[tuple[tuple[str, ...], str], ...]
    ignore_share: float
    max_blocks: int
    ranked_by: str  # "sensitivity" (measured per-block loss) or "site error" (the proxy)
    metric: str | None
    blocks: tuple[dict, ...]  # per block, most damaging first: {layer, damage, share}
    notes: tuple[str, ...] = field(default_factory=tuple)
    predicted: dict | None = None
    rotation: Rotation | None = None
    alpha_reason: str = ""
    # per site: the norm that smooths it, or why none does (isoscope.analysis.quant.coverage)
    coverage: tuple[dict, ...] = ()

    @property
    def rotates(self) -> bool:
        return self.rotation is not None and self.rotation.written

    @property
    def ignored_layers(self) -> list[int]:
        return sorted({i.layer for i in self.ignore if i.layer is not None})

    def decision(self) -> str:
        """The decision in one paragraph, each part with the number behind it: the scheme, the
        modules kept in full precision, α, and whether a rotation helps or hurts this model."""
        layers = self.ignored_layers
        kept = (
            f"keep block{'s' if len(layers) > 1 else ''} {', '.join(map(str, layers))} "
            f"({sum(i.layer is not None for i in self.ignore)} modules, "
            f"{sum(r['share'] for r in self.blocks if r['layer'] in layers):.0%} of the summed "
            f"per-block loss by {self.ranked_by}) and {HEAD} in full precision"
            if layers
            else f"keep only {HEAD} in full precision"
        )
        how = (
            f"a Hadamard rotation (block {cast(Rotation, self.rotation).block_size}) instead of "
            "SmoothQuant"
            if self.rotates
            else f"SmoothQuant at {len(self.mappings)} norm(s), "
            f"{self.alpha_reason or f'α = {self.alpha:g}'}"
        )
        parts = [
            f"Decision: {SCHEME} (int8 weights per channel, int8 activations per token) with "
            f"{how}; {kept}."
        ]
        p = self.predicted
        if p:
            unit = "KL" if p["metric"] == "kl" else "cosine"
            parts.append(
                f"Predicted {unit} {p['recipe']:.3g} (without the ignore list "
                f"{p['without_ignore']:.3g}; plain per-token W8A8 {p['per_token']:.3g}; "
                f"SmoothQuant at every site {p['smoothquant']:.3g})."
            )
        if self.rotation is not None:
            reason = self.rotation.reason
            parts.append(reason[:1].upper() + reason[1:])  # a sentence of the decision
        elif p:
            helps = (
                p["rotation"] < p["per_token"]
                if p["metric"] == "kl"
                else p["rotation"] > p["per_token"]
            )
            parts.append(
                f"A Hadamard rotation {'helps' if helps else 'does not help'} this model: {unit} "
                f"{p['rotation']:.3g} against {p['per_token']:.3g} per token (no intervals to "
                "settle it, so the recipe leaves it out)."
            )
        return " ".join(parts)

    def _quip(self) -> dict:
        assert self.rotation is not None  # written only when the recipe rotates
        return {
            "rotations": ["v"],
            "transform_type": "hadamard",
            "transform_block_size": self.rotation.block_size,
            "ignore": [i.module for i in self.ignore],
        }

    def modifiers(self) -> dict:
        """``{ModifierName: arguments}`` in the order llm-compressor runs them."""
        smooth = {
            "smoothing_strength": self.alpha,
            "mappings": [[list(b), s] for b, s in self.regex],
        }
        quant = {"targets": ["Linear"], "scheme": SCHEME, "ignore": [i.module for i in self.ignore]}
        if self.rotates:
            return {"QuIPModifier": self._quip(), "QuantizationModifier": quant}
        return (
            {"SmoothQuantModifier": smooth, "QuantizationModifier": quant}
            if self.regex
            else {"QuantizationModifier": quant}
        )

    def to_dict(self) -> dict:
        """The plain JSON of the same decisions, for other toolchains."""
        return {
            "model": self.model,
            "scheme": SCHEME,
            "alpha": self.alpha,
            "alpha_reason": self.alpha_reason,
            "rotation": None
            if self.rotation is None
            else {
                "written": self.rotation.written,
                "verdict": self.rotation.verdict,
                "reason": self.rotation.reason,
                "modifier": "QuIPModifier",
                "transform_block_size": self.rotation.block_size,
            },
            "smoothquant": {
                "used": not self.rotates,
                "mappings": [
                    {
                        "layer": m.layer,
                        "role": m.role,
                        "smooth": m.smooth,
                        "balance": list(m.balance),
                        "gamma_offset": m.gamma_offset,
                    }
                    for m in self.mappings
                ],
                "skipped": [
                    {"layer": s.layer, "smooth": s.smooth, "reason": s.reason} for s in self.skipped
                ],
                "llmcompressor_mappings": [[list(b), s] for b, s in self.regex],
                "sites": list(self.coverage),
            },
            "ignore": [
                {"module": i.module, "layer": i.layer, "reason": i.reason} for i in self.ignore
            ],
            "ignore_rule": {
                "ignore_share": self.ignore_share,
                "max_blocks": self.max_blocks,
                "ranked_by": self.ranked_by,
                "metric": self.metric,
                "blocks": list(self.blocks),
            },
            "predicted": self.predicted,
            "notes": list(self.notes),
            "recipe": self.modifiers(),
        }

    def yaml(self) -> str:
        """The llm-compressor recipe, with each ignored module's reason and each mapping's role as
        a comment (JSON scalars, which are valid YAML, keep names and regexes exact)."""
        q = json.dumps
        lines = [
            f"# isoscope quant recipe for {self.model}",
            "# W8A8 (int8 weights per channel, int8 activations per token, dynamic), "
            + (
                "a Hadamard rotation of every Linear input."
                if self.rotates
                else "SmoothQuant\n# at the norms the traced wiring found."
            ),
            f"# Format: llm-compressor ({LLMCOMPRESSOR}), e.g.",
            '#   oneshot(model=..., dataset=..., recipe="this.yaml")',
        ]
        if self.predicted:
            p = self.predicted
            lines.append(
                f"# isoscope's prediction ({p['metric']} on {p['end_tokens']} tokens of the first "
                f"{p.get('end_texts', 1)} corpus texts): {p['recipe']:.4g} with this recipe,\n"
                f"# {p['without_ignore']:.4g} "
                f"without the ignore list, {p['per_token']:.4g} for plain per-token W8A8."
            )
        lines += ["quant_stage:", "  quant_modifiers:"]
        if self.rotation is not None:
            lines += _comment(self.rotation.reason, "    # rotation: ")
        if self.rotates:
            quip = self._quip()
            lines += [
                "    QuIPModifier:",
                f"      rotations: {q(quip['rotations'])}",
                f"      transform_type: {q(quip['transform_type'])}",
                f"      transform_block_size: {quip['transform_block_size']}",
                f"      ignore: {q(quip['ignore'])}",
                "    # SmoothQuantModifier left out: the rotation replaces it, as isoscope "
                "simulated each alone",
            ]
        elif self.regex:
            lines += [
                "    SmoothQuantModifier:",
                f"      smoothing_strength: {self.alpha:g}",
                "      mappings:",
            ]
            for (balance, smooth), why in zip(self.regex, self._regex_comments(), strict=True):
                lines.append(f"        # {why}")
                lines.append(f"        - [[{', '.join(q(b) for b in balance)}], {q(smooth)}]")
        for s in self.skipped if not self.rotates else ():
            lines.append(f"    # not smoothed: {s.smooth}: {s.reason}")
        lines += [
            "    QuantizationModifier:",
            '      targets: ["Linear"]',
            f"      scheme: {q(SCHEME)}",
        ]
        if self.ignore:
            lines.append("      ignore:")
            lines += [f"        - {q(i.module)}  # {i.reason}" for i in self.ignore]
        else:
            lines.append("      ignore: []")
        return "\n".join(lines) + "\n"

    def _regex_comments(self) -> list[str]:
        out = []
        for balance, smooth in self.regex:
            hits = [m for m in self.mappings if matches(smooth, m.smooth)]
            layers = sorted({m.layer for m in hits})
            role = hits[0].role if hits else "?"
            where = f"blocks {layers[0]}-{layers[-1]}" if len(layers) > 1 else f"block {layers[0]}"
            offset = (
                " (an offset norm, x·(1 + w): llm-compressor's oneshot converts the known offset-norm "
                "classes before smoothing)"
                if hits and hits[0].gamma_offset
                else ""
            )
            out.append(f"{role}: the norm feeds {len(balance)} projection(s), {where}{offset}")
        return out


def _comment(text: str, first: str, width: int = 96) -> list[str]:
    """``text`` as YAML comment lines of at most about ``width`` characters."""
    import textwrap

    indent = first[: len(first) - len(first.lstrip())] + "#   "
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=indent)


def build_recipe(
    loaded,
    report: QuantReport,
    *,
    ignore_share: float = IGNORE_SHARE.default,
    max_blocks: int = MAX_BLOCKS,
) -> Recipe:
    """The recipe of ``report`` (its α; its sensitivity, or its per-site errors, for the ignore
    list); see the module docstring."""
    check_ignore_rule(ignore_share, max_blocks)
    mappings, skipped, notes = norm_mappings(loaded)
    why_none = tuple(notes)  # norm_mappings' reason when it wrote no mapping at all
    public = name_prefix(loaded)
    names = {public + n for n, _ in loaded.encoder.named_modules()}
    blocks = public + report.scan.site_map.blocks_path
    regex = regex_mappings(mappings, names, blocks)
    ignore, rows, ranked_by = ignore_list(report, ignore_share, max_blocks)
    notes += list(report.scan.site_map.notes)
    named = dict(loaded.encoder.named_modules())
    conv = sorted(
        s.site.name
        for s in report.scan.sites
        if any(type(named[p]) is not torch.nn.Linear for p in s.site.paths)
    )
    if conv:
        notes.append(
            f"{len(conv)} site(s) use projections that are not nn.Linear (e.g. GPT-2's Conv1D, "
            f"{conv[0]}): the recipe's targets: [Linear] leaves them unquantized"
        )
    if any(m.gamma_offset for m in mappings):
        notes.append(
            "some smoothed norms compute x·(1 + w): llm-compressor's oneshot converts the known "
            "offset-norm classes (Gemma, Qwen3-Next) first; a new class needs registering there"
        )
    from isoscope.analysis.quant.coverage import site_coverage

    coverage = site_coverage(report.scan.site_map, mappings, skipped, why_none)
    return Recipe(
        coverage=coverage,
        model=loaded.info.display_name,
        alpha=float(report.alpha),
        mappings=tuple(mappings),
        skipped=tuple(skipped),
        ignore=tuple(ignore),
        regex=tuple(regex),
        ignore_share=float(ignore_share),
        max_blocks=int(max_blocks),
        ranked_by=ranked_by,
        metric=report.metric,
        blocks=tuple(rows),
        notes=tuple(notes),
        rotation=rotation_decision(report),
        alpha_reason=report.alpha_reason(),
    )


def site_schemes(report: QuantReport, recipe: Recipe, *, ignore: bool = True) -> list[str | None]:
    """Per site of ``report.scan``, the scheme the recipe gives it: ``rotation`` everywhere when
    it rotates, else ``smoothquant`` where its projections are a mapping's balance layers,
    ``per_token`` elsewhere; None (full precision) in the ignored blocks."""
    smoothed = {b for m in recipe.mappings for b in m.balance}
    kept = set(recipe.ignored_layers) if ignore else set()
    out: list[str | None] = []
    for s in report.scan.sites:
        if s.site.layer in kept:
            out.append(None)
        elif recipe.rotates:
            out.append("rotation")
        elif set(s.site.modules) <= smoothed:
            out.append("smoothquant")
        else:
            out.append("per_token")
    return out


def predict(loaded, report: QuantReport, recipe: Recipe) -> Recipe:
    """The recipe with isoscope's predicted end metric: every site fake-quantized as the recipe
    says (:func:`site_schemes`), with and without the ignore list (two passes of the end texts)."""
    from dataclasses import replace

    from isoscope.analysis.quant.readiness.evaluation import mixed_end

    if report.end is None:
        return recipe
    values = {
        "recipe": mixed_end(loaded, report.scan, site_schemes(report, recipe), alpha=report.alpha),
        "without_ignore": mixed_end(
            loaded, report.scan, site_schemes(report, recipe, ignore=False), alpha=report.alpha
        ),
    }
    predicted = {
        "metric": report.metric,
        "end_tokens": report.scan.end_tokens,
        "end_texts": int(report.scan.end_ids.shape[0]),
        **values,
        "per_token": report.end["per_token"],
        "smoothquant": report.end["smoothquant"],
        "rotation": report.end["rotation"],
    }
    if not all(math.isfinite(v) for v in values.values()):
        predicted["note"] = "a prediction is not finite"
    return replace(recipe, predicted=predicted)
