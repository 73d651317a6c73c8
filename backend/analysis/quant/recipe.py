"""From diagnosis to a quantized checkpoint: an llm-compressor recipe (YAML) and a plain JSON of
the same decisions, written from what isoscope measured (docs/methods.md section 10; docs/quantization.md).

- **SmoothQuant mappings** (Xiao et al. 2023, arXiv 2211.10438) come from the model's own wiring
  (:func:`backend.engine.arch.wiring`, one traced forward pass): every norm inside a block whose
  output is the input of projections, with *every* projection it feeds as the balance layers.
  SmoothQuant folds ``1 / s`` into the norm's weight and ``s`` into each consumer's input columns,
  so a norm is smoothed only when that fold is exact: all its consumers are ``nn.Linear`` (a fused
  expert tensor, a router module or GPT-2's transposed ``Conv1D`` is not), and the norm's output is
  not also the residual stream (post-LN BERT). Mappings are written as one regex per role when the
  same names repeat in every block (llm-compressor's own style), else module by module.
- **The ignore list** keeps the most sensitive blocks in full precision: the measured per-block
  end loss (each block alone W8A8 per token; :func:`~backend.analysis.quant.readiness.
  layer_sensitivity`), most damaging first, until the kept blocks account for ``ignore_share`` of
  the summed per-block loss (:data:`~backend.analysis.quant.params.IGNORE_SHARE`), at most
  ``max_blocks``. Without a sensitivity run the per-site error (the cheap proxy) ranks the blocks.
  ``lm_head`` is always kept (isoscope's end metric keeps it in full precision, as llm-compressor's
  W8A8 examples do). Each ignored module's reason is a YAML comment beside it.
- **The scheme** is llm-compressor's ``W8A8`` preset: int8 weights per output channel and int8
  activations per token, dynamic, symmetric: isoscope's ``per_token`` scheme.
- **α** is the report's: the α sweep's best on the scan unless the user gave one.
- **A rotation** (llm-compressor's ``QuIPModifier``, input side ``v``, Hadamard blocks; QuIP#,
  Tseng et al. 2024, arXiv 2402.04396; isoscope's ``rotation`` scheme is the same online
  ``x H``, ``W H``) replaces SmoothQuant only when the measured end metric of the rotation is
  better than both per-token W8A8 and SmoothQuant with 95% intervals that do not overlap
  theirs: on overlapping intervals the order is not settled, and rotation hurts some models
  (SpinQuant #33, QuaRot #27, auto-round #1797). The YAML says why or why not in a comment.

The recipe's format is llm-compressor's (``Recipe.from_dict``): ``<name>_stage`` ->
``<name>_modifiers`` -> ``{ModifierName: arguments}``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

import torch

from backend.analysis.quant.params import IGNORE_SHARE
from backend.analysis.quant.readiness.report import MIN_BOOTSTRAP_TEXTS, QuantReport
from backend.analysis.quant.schemes import SCHEME_LABELS, hadamard_block
from backend.analysis.quant.sites import name_prefix, public_names
from backend.engine.arch import wiring
from backend.engine.errors import InputError

SCHEME = "W8A8"
MAX_BLOCKS = 4
HEAD = "lm_head"
LLMCOMPRESSOR = "https://github.com/vllm-project/llm-compressor"


@dataclass(frozen=True)
class Mapping:
    """One SmoothQuant mapping: the norm ``smooth`` whose output is the input of ``balance``
    (public module names, as the checkpoint and llm-compressor name them)."""

    layer: int
    role: str
    smooth: str
    balance: tuple[str, ...]
    gamma_offset: float = 0.0


@dataclass(frozen=True)
class Skipped:
    """A norm that feeds projections but is not smoothed, and why."""

    layer: int
    smooth: str
    reason: str


@dataclass(frozen=True)
class Ignored:
    """A module kept in full precision: ``layer`` None for the output head."""

    module: str
    layer: int | None
    reason: str


@dataclass(frozen=True)
class Rotation:
    """The rotation decision: ``written`` when the recipe rotates (``QuIPModifier`` in place of
    SmoothQuant), ``reason`` with the numbers behind it, ``block_size`` the Hadamard block."""

    written: bool
    verdict: str  # "helps", "hurts" or "not settled"
    reason: str
    block_size: int


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
    # per site: the norm that smooths it, or why none does (backend.analysis.quant.coverage)
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
            f"a Hadamard rotation (block {self.rotation.block_size}) instead of SmoothQuant"
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
            hits = [m for m in self.mappings if _matches(smooth, m.smooth)]
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


def _matches(target: str, name: str) -> bool:
    return re.match(target[3:], name) is not None if target.startswith("re:") else target == name


def norm_mappings(loaded) -> tuple[list[Mapping], list[Skipped], list[str]]:
    """SmoothQuant's mappings from the traced wiring (see the module docstring): the norms that can
    be smoothed exactly, those that cannot (and why), and notes."""
    wired = wiring(loaded)
    named = dict(loaded.model.named_modules())
    public = public_names(loaded)
    if wired.post_ln:
        return (
            [],
            [],
            [
                "the blocks' outputs are norm outputs (post-LN): the norm's output is also the residual "
                "stream, so folding SmoothQuant's scales into it would change the model; no mappings"
            ],
        )
    mappings, skipped = [], []
    for norm in wired.norms:
        if norm.layer is None or not norm.feeds_block:
            continue
        smooth = public(norm.path)
        consumers = _direct_consumers(norm.feeds_block)
        not_linear = [
            f"{public(p)} ({type(named[p]).__name__})"
            for p in consumers
            if type(named[p]) is not torch.nn.Linear
        ]
        narrow = _narrower_than_consumers(named[norm.path], [named[p] for p in consumers])
        if not_linear or narrow:
            reason = (
                "it also feeds " + ", ".join(not_linear[:3]) + ", which is not an nn.Linear "
                "whose input columns the scales can be folded into"
                if not_linear
                else narrow
            )
            skipped.append(Skipped(norm.layer, smooth, reason))
            continue
        mappings.append(
            Mapping(
                norm.layer,
                norm.role,
                smooth,
                tuple(public(p) for p in consumers),
                float(norm.gamma_offset),
            )
        )
    return mappings, skipped, []


def _direct_consumers(feeds: tuple[str, ...]) -> tuple[str, ...]:
    """The modules that multiply a norm's output themselves: a consumer that holds another
    consumer (a Mamba mixer, whose own parameters make it look like a projection, hands its input
    to its in_proj) is left out."""
    return tuple(p for p in feeds if not any(q.startswith(p + ".") for q in feeds))


def _narrower_than_consumers(norm: torch.nn.Module, consumers: list) -> str | None:
    """Why a norm's weight cannot take SmoothQuant's per-column scales: it has fewer channels
    than its consumers' inputs (Gated DeltaNet's gated norm runs per head on d_head channels,
    one weight shared by every head of out_proj's input). None when the widths agree."""
    weight = getattr(norm, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.ndim != 1:
        return None
    for module in consumers:
        columns = getattr(module, "in_features", None)
        if isinstance(columns, int) and columns != weight.shape[0]:
            return (
                f"its weight has {weight.shape[0]} channels (shared across heads) but "
                f"{type(module).__name__} inputs have {columns} columns: the scales cannot be "
                "folded into it exactly"
            )
    return None


def regex_mappings(
    mappings: list[Mapping], module_names: set[str], blocks: str
) -> list[tuple[tuple[str, ...], str]]:
    """The mappings in llm-compressor's form: one ``re:`` target per name that repeats in every
    block where a role is smoothed (checked to match exactly those modules among
    ``module_names``), else the plain module names block by block."""
    out: list[tuple[tuple[str, ...], str]] = []
    by_role: dict[str, list[Mapping]] = {}
    for m in mappings:
        by_role.setdefault(m.role, []).append(m)
    block_re = re.compile(rf"^(.*{re.escape(blocks)}\.)(\d+)\.(.+)$")

    def suffix(name: str) -> str | None:
        found = block_re.match(name)
        return found.group(3) if found else None

    for role_maps in by_role.values():
        shapes = {(suffix(m.smooth), tuple(suffix(b) for b in m.balance)) for m in role_maps}
        if len(shapes) == 1 and None not in next(iter(shapes))[1] and next(iter(shapes))[0]:
            smooth_sfx, balance_sfx = next(iter(shapes))
            targets = [f"re:.*\\.{re.escape(s)}$" for s in (*balance_sfx, smooth_sfx)]
            expected = [{m.smooth for m in role_maps}] + [
                {m.balance[k] for m in role_maps} for k in range(len(balance_sfx))
            ]
            found = [
                {n for n in module_names if _matches(t, n)} for t in (targets[-1], *targets[:-1])
            ]
            if found == expected:
                out.append((tuple(targets[:-1]), targets[-1]))
                continue
        out += [(m.balance, m.smooth) for m in role_maps]
    return out


def _block_damage(report: QuantReport) -> tuple[dict[int, float], str]:
    """Per block, how much quantizing it alone hurts: the measured end loss (KL, or 1 - cosine)
    when the sensitivity ran, else the mean per-site per-token error (the proxy)."""
    if report.sensitivity:
        sign_kl = report.metric == "kl"
        return {
            r["layer"]: max(0.0, r["end"] if sign_kl else 1.0 - r["end"])
            for r in report.sensitivity
        }, "sensitivity"
    return report.layer_error("per_token"), "site error"


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
    rows = [
        {"layer": i, "damage": damage[i], "share": damage[i] / total if total > 0 else 0.0}
        for i in ranked
    ]
    kept, covered = [], 0.0
    for row in rows:
        if covered >= ignore_share - 1e-12 or len(kept) >= max_blocks or row["damage"] <= 0:
            break
        kept.append(row["layer"])
        covered += row["share"]
    return rows, kept


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
    damage, ranked_by = _block_damage(report)
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
    from backend.analysis.quant.coverage import site_coverage

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

    from backend.analysis.quant.readiness.evaluation import mixed_end

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
