"""Prose builders: each section's findings written from the measured numbers (never re-derived
here), with its key figure and tables; :class:`Context` computes what several sections share once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from isoscope.engine.errors import InputError, IsoscopeError
from isoscope.engine.inputs.media import KIND_NOUNS
from isoscope.engine.params import MASSIVE_ABS_THRESHOLD, MASSIVE_MEDIAN_RATIO
from isoscope.share.report.model import SECTION_TITLES, SOURCES, ReportSettings, Section

# Sun et al.'s rule as the report writes it: "max(100, 1000 x median)"
MASSIVE_MAX = f"max({MASSIVE_ABS_THRESHOLD:g}, {MASSIVE_MEDIAN_RATIO:g} x median)"

# ----------------------------------------------------------------------------- formatting


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _num(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def _dims(dims: Sequence[int]) -> str:
    return ", ".join(str(int(j)) for j in dims) or "none"


def _states(names: Sequence[str]) -> str:
    """Hidden-state names with runs of 3+ consecutive layers shortened: 'emb, 1–29'."""
    parts: list[str] = []
    run: list[int] = []

    def flush() -> None:
        if len(run) >= 3:
            parts.append(f"{run[0]}–{run[-1]}")
        else:
            parts.extend(str(i) for i in run)
        run.clear()

    for name in names:
        if name.isdigit() and run and int(name) == run[-1] + 1:
            run.append(int(name))
            continue
        flush()
        if name.isdigit():
            run.append(int(name))
        else:
            parts.append(name)
    flush()
    return ", ".join(parts)


# ----------------------------------------------------------------------------- shared numbers


@dataclass
class Context:
    """What several sections share, computed once (raw/clipped anisotropy, outlier dims)."""

    loaded: Any
    result: Any
    settings: ReportSettings
    pairs: tuple[list[str], list[str], list[float]] | None
    in_place: bool
    cache: dict = field(default_factory=dict)
    inputs: tuple | None = None  # an image / audio analysis's items, for the sections that rerun it

    @property
    def kind(self) -> str:
        """``text``, ``image`` or ``audio``: what the analysis read."""
        return self.result.input_kind

    def once(self, name: str, compute: Callable[[], Any]) -> Any:
        if name not in self.cache:
            self.cache[name] = compute()
        return self.cache[name]

    @property
    def outliers_by_state(self) -> list[list[int]]:
        from isoscope.analysis.outliers import outlier_dims_by_state

        criteria = self.criteria_by_state
        return self.once("dims", lambda: outlier_dims_by_state(self.result, criteria=criteria))

    @property
    def criteria_by_state(self) -> list[dict[str, list[int]]]:
        from isoscope.analysis.outliers import criteria_by_state

        return self.once("criteria", lambda: criteria_by_state(self.result))

    @property
    def isotropy(self):
        from isoscope.analysis.anisotropy import by_state

        s = self.settings
        return self.once(
            "iso", lambda: by_state(self.result, n_pairs=s.pairs, seed=s.seed, similarity=False)
        )

    def clipped(self, dims_by_state: list[list[int]]) -> np.ndarray:
        from isoscope.analysis.anisotropy import clipped_anisotropy_by_state

        key = "clipped" + repr(dims_by_state)
        s = self.settings
        return self.once(
            key,
            lambda: clipped_anisotropy_by_state(
                self.result, dims_by_state, n_pairs=s.pairs, seed=s.seed
            ),
        )


# ----------------------------------------------------------------------------- sections


def _outliers(ctx: Context) -> Section:
    from isoscope.plots.outliers import criteria_marks, headline_outlier, layer_dim_heatmap

    r = ctx.result
    names = r.state_names
    sec = Section("outliers", SECTION_TITLES["outliers"], source=SOURCES["outliers"])
    headline = headline_outlier(r, ctx.criteria_by_state)
    flagged = [(names[s], dims) for s, dims in enumerate(ctx.outliers_by_state) if dims]
    if headline is None:
        sec.findings.append(
            f"No dimension is an outlier at any of the {r.num_states} hidden states (mean more than 3 "
            "std from the mean of all dims' means, or holding the min/max of at least 50 % of tokens): "
            "the coordinates are on a common scale."
        )
    else:
        dim = headline["dim"]
        s = names.index(headline["state"])
        low, high = float(r.argmin_freq[s, dim]), float(r.argmax_freq[s, dim])
        holds = (
            f"holds the minimum of {_pct(low)} of tokens"
            if low >= high
            else f"holds the maximum of {_pct(high)} of tokens"
        )
        clipped = ctx.clipped([[dim]] * r.num_states)
        raw = ctx.isotropy.anisotropy
        sec.findings.append(
            f"Dimension {dim} {holds} at state {headline['state']} (mean {headline['mean']:+.2f} against a "
            f"typical |mean| of {headline['typical']:.2f}); zeroing it cuts anisotropy from "
            f"{_num(raw[s], 2)} to {_num(clipped[s], 2)}."
        )
        sec.findings.append(
            f"It is flagged at {len(headline['states'])} of {r.num_states} hidden states "
            f"({_states(headline['states'])})."
        )
        last = ctx.outliers_by_state[-1]
        if dim not in last:
            sec.findings.append(
                f"It is not an outlier in the final state ({names[-1]}): "
                + (
                    f"there the outlier dims are {_dims(last)}."
                    if last
                    else "no dimension is flagged there."
                )
            )
    sec.tables.append(
        (
            "Outlier dims per hidden state (z-score or extreme-index rule, sorted by |mean|)",
            [
                {"hidden state": names[s], "outlier dims": _dims(dims)}
                for s, dims in enumerate(ctx.outliers_by_state)
            ],
        )
    )
    if flagged:
        sec.notes.append(
            f"{len(flagged)} of {r.num_states} hidden states have at least one outlier dim."
        )
    sec.figures.append(
        layer_dim_heatmap(r.mean, names, "mean", marks=criteria_marks(ctx.criteria_by_state))
    )
    return sec


def _anisotropy(ctx: Context) -> Section:
    from isoscope.plots.overview import anisotropy_with_lines

    r = ctx.result
    names = r.state_names
    iso = ctx.isotropy
    raw = iso.anisotropy
    dims_by_state = ctx.outliers_by_state
    clipped = ctx.clipped(dims_by_state)
    sec = Section("anisotropy", SECTION_TITLES["anisotropy"], source=SOURCES["anisotropy"])
    if not np.isfinite(raw).any():
        sec.skipped = (
            "the token sample has no pair of tokens from different texts (give at least 2 texts)"
        )
        return sec
    peak = int(np.nanargmax(raw))
    last = len(raw) - 1
    course = (
        f"peaks at {_num(raw[peak])} at state {names[peak]} and is {_num(raw[-1])} at the final "
        f"state {names[-1]}"
        if 0 < peak < last
        else f"is highest at the final state {names[-1]} ({_num(raw[-1])})"
        if peak == last
        else f"is highest there and {_num(raw[-1])} at the final state {names[-1]}"
    )
    sec.findings.append(
        f"Anisotropy (mean cosine of {iso.n_pairs:,} random token pairs from different texts) is "
        f"{_num(raw[0])} at {names[0]}, {course}."
    )
    with_dims = [s for s, dims in enumerate(dims_by_state) if dims]
    if with_dims:
        lo, hi = float(np.nanmin(clipped[with_dims])), float(np.nanmax(clipped[with_dims]))
        at = peak if peak in with_dims else with_dims[int(np.nanargmax(raw[with_dims]))]
        sec.findings.append(
            f"Zeroing each state's outlier dims brings it to {_num(lo)}–{_num(hi)} at the "
            f"{len(with_dims)} states that have them (state {names[at]}: {_num(raw[at])} → "
            f"{_num(clipped[at])}, dims {_dims(dims_by_state[at])})."
        )
    else:
        sec.findings.append("No state has outlier dims, so clipping them changes nothing here.")
    top = iso.top_dims[peak]
    if top and np.isfinite(top[0][1]):
        dim, share = top[0]
        sec.findings.append(
            f"At state {names[peak]}, dimension {dim} carries {_pct(share)} of the mean cosine "
            "(Timkey & van Schijndel's per-dimension split)."
        )
    finite = iso.isoscore[np.isfinite(iso.isoscore)]
    if len(finite):
        sec.findings.append(
            f"IsoScore (1 = variance spread evenly over all directions) is {_num(finite.min(), 2)}–"
            f"{_num(finite.max(), 2)} across hidden states."
        )
    sec.figures.append(
        anisotropy_with_lines(names, raw, [(clipped, "outlier dims zeroed", "dash")])
    )
    clip_at = with_dims[-1] if with_dims else None
    if clip_at is not None:
        sec.figures.append(_clip_projection(ctx, clip_at, dims_by_state[clip_at]))
    return sec


def _clip_projection(ctx: Context, state: int, dims: list[int]):
    """PCA of the token sample at ``state``, raw and with ``dims`` zeroed (the projections page)."""
    from isoscope.analysis.projections.methods import (
        before_after,
        hover_contexts,
        projection_sample,
        token_colouring,
    )
    from isoscope.plots.projections import before_after_figure

    r = ctx.result
    rows = projection_sample(len(r.sample_index), ctx.settings.projection_points, ctx.settings.seed)
    before, after = before_after(
        r.sample_vectors[state], rows, "pca", "clip", {"dims": dims}, ctx.settings.seed
    )
    colouring = token_colouring(r.sample_tokens.take(rows), r.tokens, "category")
    hover = hover_contexts(r.tokens, r.sample_index[rows])
    name = r.state_names[state]
    return before_after_figure(
        before,
        after,
        colouring,
        hover,
        (f"PCA, raw · state {name}", f"PCA, dims {_dims(dims)} zeroed · state {name}"),
        height=460,
    )


def _layernorm(ctx: Context) -> Section:
    from isoscope.analysis.layernorm.ablation import run_ablation
    from isoscope.analysis.layernorm.params import ln_outliers, norms_of, select_norms
    from isoscope.plots.layernorm import ablation_vs_controls

    loaded = ctx.loaded
    sec = Section("layernorm", SECTION_TITLES["layernorm"], source=SOURCES["layernorm"])
    try:
        sites = norms_of(loaded)
    except IsoscopeError as exc:
        sec.skipped = f"no LayerNorms to inspect: {exc}"
        return sec
    detection = ln_outliers(loaded)
    if not detection.dims:
        sec.skipped = (
            f"no LayerNorm outlier dims (gamma or beta more than {detection.k:g} std from its norm's mean "
            f"in at least {detection.needed} of {len(detection.names)} norms"
            + (
                "; a random-init LayerNorm has gamma 1 and beta 0"
                if loaded.info.random_init
                else ""
            )
            + "), so there is nothing to ablate"
        )
        return sec
    dims = detection.dims
    rows = detection.table()
    sec.findings.append(
        f"LayerNorm outlier dims: {_dims(dims)} (flagged in at least {detection.needed} of "
        f"{len(detection.names)} norms: {', '.join(detection.names)})."
    )
    if ctx.kind != "text" and ctx.inputs is None:
        sec.skipped = (
            "the ablation reruns the model on the images or clips, which this report was not "
            "given (a saved analysis keeps only their names)"
        )
        return sec
    given = ctx.result.texts if ctx.kind == "text" else ctx.inputs
    assert given is not None  # images or clips without their items returned above
    texts = list(given[: ctx.settings.ablation_texts])
    report = run_ablation(
        loaded,
        texts,
        dims,
        random_controls=ctx.settings.random_controls,
        seed=ctx.settings.seed,
        max_length=ctx.result.settings.max_length,
        batch_size=ctx.result.settings.batch_size,
        pairs=ctx.pairs,
        in_place=ctx.in_place,
    )
    norms = [s.name for s in select_norms(sites, None)]
    text = _ablation_sentence(report, norms, len(dims), len(texts), ctx.kind)
    sec.findings.append(text)
    if report.effect.mlm_loss is not None and report.mlm_loss_original is not None:
        sec.findings.append(
            f"Masked-token loss: {report.mlm_loss_original:.3f} → {report.effect.mlm_loss:.3f} nats."
        )
    if report.effect.sts_spearman is not None and report.sts_spearman_original is not None:
        sec.findings.append(
            f"STS Spearman × 100 at the final state: {report.sts_spearman_original[-1]:.1f} → "
            f"{report.effect.sts_spearman[-1]:.1f} after the ablation."
        )
    sec.tables.append(("LayerNorm outlier dims (norms flagging gamma / beta)", rows))
    sec.notes.extend(n for n in report.notices if "MLM head" not in n)
    sec.figures.append(ablation_vs_controls(report, "embedding_cosine"))
    return sec


def _ablation_sentence(report, norms: list[str], n_dims: int, n_texts: int, kind: str) -> str:
    """What zeroing the dims in ``norms`` did to the final state, against the random controls."""
    final = float(report.effect.embedding_cosine[-1])
    controls = [float(e.embedding_cosine[-1]) for _, e in report.controls]
    text = (
        f"Zeroing them in {len(norms)} LayerNorms ({', '.join(norms)}) leaves a final-state "
        f"{'sentence embedding' if kind == 'text' else 'mean-pooled vector'} with cosine "
        f"{final:.3f} to the original (mean over {n_texts} {KIND_NOUNS[kind]})"
    )
    if not controls:
        return text + "."
    drift, control_drift = 1 - final, 1 - float(np.mean(controls))
    verdict = (
        "more damage than any random control"
        if final < min(controls)
        else "no more damage than random dims"
    )
    ratio = f", {drift / control_drift:.1f}x their mean drift" if control_drift > 0 else ""
    return text + (
        f"; {len(controls)} random {n_dims}-dim controls give {min(controls):.3f}–{max(controls):.3f}: "
        f"{verdict}{ratio}."
    )


def _positional(ctx: Context) -> Section:
    from isoscope.analysis.positional.table import (
        ProbeSettings,
        analyse_position_table,
        position_offset,
        position_table_weights,
        probe_result,
    )
    from isoscope.engine.load.models import position_table
    from isoscope.plots.positional import probe_accuracy_line

    r, loaded = ctx.result, ctx.loaded
    names = r.state_names
    sec = Section("positional", SECTION_TITLES["positional"], source=SOURCES["positional"])
    max_position = min(ctx.settings.probe_max_position, r.settings.max_length)
    try:
        probe = probe_result(
            r,
            ProbeSettings(
                max_position=max_position, seed=ctx.settings.seed, max_iter=ctx.settings.probe_iter
            ),
        )
    except InputError as exc:
        sec.notes.append(f"No position probe: {exc}.")
        probe = None
    if probe is not None:
        acc = probe.accuracy
        best = int(np.argmax(acc))
        sec.findings.append(
            f"A bias-free linear probe recovers absolute position (0–{max_position - 1}) on held-out texts "
            f"with accuracy {acc[0]:.2f} at {names[0]} and {acc[-1]:.2f} at the final state "
            f"(best {acc[best]:.2f} at {names[best]}; majority-class baseline {probe.chance:.2f})."
        )
        sec.figures.append(
            probe_accuracy_line(names, probe.accuracy, probe.train_accuracy, probe.chance)
        )
    if position_table(loaded) is None:
        sec.notes.append(
            f"No learned absolute position table (position embeddings: {loaded.info.position_embedding})."
        )
    else:
        table = analyse_position_table(
            position_table_weights(loaded), min(128, r.settings.max_length), position_offset(loaded)
        )
        n = table.num_positions
        neighbours = float(np.mean(np.diag(table.cosine, 1)))
        far = n // 2
        distant = float(np.mean(np.diag(table.cosine, far)))
        sec.findings.append(
            f"Learned position table: neighbouring positions have mean cosine {neighbours:.2f}, positions "
            f"{far} apart {distant:.2f}; its first two principal components explain "
            f"{_pct(float(table.pca_explained[:2].sum()))} of its variance (first {n} positions)."
        )
        top = table.top_extreme_dims(1)[0]
        hidden = [names[s] for s, dims in enumerate(ctx.outliers_by_state) if top["dim"] in dims]
        extreme = "max" if top["argmax_share"] >= top["argmin_share"] else "min"
        sec.findings.append(
            f"Dimension {top['dim']} holds the {extreme} of "
            f"{_pct(max(top['argmax_share'], top['argmin_share']))} of the position vectors"
            + (
                f"; it is a hidden-state outlier at {_states(hidden)}."
                if hidden
                else "; it is not a hidden-state outlier."
            )
        )
    if not sec.findings:
        sec.skipped = " ".join(sec.notes) or "no positional analysis applies to this model"
    return sec


def _similarity(ctx: Context) -> Section:
    from isoscope.analysis.similarity import clip_dims_by_state, pool_pairs, sts_by_state
    from isoscope.engine.inputs.pairs import SentencePairs
    from isoscope.plots.similarity import sts_figure

    sec = Section("similarity", SECTION_TITLES["similarity"], source=SOURCES["similarity"])
    if ctx.kind != "text":
        sec.skipped = (
            f"does not apply: it scores sentence pairs, and this analysis read {ctx.kind}s"
        )
        return sec
    if ctx.pairs is None:
        sec.skipped = (
            "no sentence pairs given (the CLI's --pairs CSV with sentence1,sentence2,score)"
        )
        return sec
    left, right, gold = ctx.pairs
    pairs = SentencePairs(tuple(left), tuple(right), np.asarray(gold, dtype=np.float64), "pairs")
    s = ctx.result.settings
    first, second = pool_pairs(ctx.loaded, pairs, s.max_length, s.batch_size)
    clip = clip_dims_by_state("auto", first, second, result=ctx.result)
    rows = sts_by_state(first, second, pairs.scores, clip, state_names=ctx.result.state_names)
    final = rows[-1]
    best = max(rows, key=lambda row: row["raw"] if np.isfinite(row["raw"]) else -np.inf)
    sec.findings.append(
        f"STS Spearman × 100 on {len(left):,} pairs: {final['raw']:.1f} at the final state "
        f"({final['clipped']:.1f} with its outlier dims {_dims(final['clipped_dims'])} zeroed); "
        f"best raw {best['raw']:.1f} at state {best['name']}."
    )
    helped = [row for row in rows if row["clipped"] - row["raw"] >= 1.0]
    if helped:
        sec.findings.append(
            "Clipping helps by at least 1 point at "
            + ", ".join(
                f"{row['name']} ({row['raw']:.1f} → {row['clipped']:.1f})" for row in helped
            )
            + "."
        )
    sec.figures.append(sts_figure(rows))
    return sec


def _massive(ctx: Context) -> Section:
    """Massive activations (Sun et al. 2024) and attention sinks (Xiao et al. 2023; Gu et al. 2024's
    alpha) from :func:`isoscope.analysis.massive.scan.scan_massive`, when this build has it."""
    sec = Section("massive", SECTION_TITLES["massive"], source=SOURCES["massive"])
    loaded = ctx.loaded
    if not loaded.info.is_causal:
        sec.skipped = (
            "the model is an encoder (bidirectional attention); massive activations and attention "
            "sinks are reported for decoders"
        )
        return sec
    try:
        from isoscope.analysis.massive.massive import peak_state
        from isoscope.analysis.massive.scan import scan_massive
    except ImportError as exc:
        if getattr(exc, "name", "") not in (
            "isoscope.analysis.massive.massive",
            "isoscope.analysis.massive.scan",
            "isoscope.analysis.massive.sinks",
        ):
            raise
        sec.skipped = "this isoscope build has no massive-activation or attention-sink analysis"
        return sec
    texts = list(ctx.result.texts[: ctx.settings.massive_texts])
    scan = scan_massive(
        loaded,
        texts,
        max_length=ctx.result.settings.max_length,
        batch_size=ctx.result.settings.batch_size,
        int8=False,
    )
    m = scan.massive
    names = list(m.state_names)
    ratio = m.ratio
    s = peak_state(m)
    top = float(m.top_value[s, 0])
    where = (
        f"dim {int(m.top_dim[s, 0])}, token {str(m.top_token[s, 0])!r} at position "
        f"{int(m.top_position[s, 0])}"
    )
    massive_states = [names[i] for i in range(len(names)) if m.n_massive[i] > 0]
    if massive_states:
        carriers = m.carriers[s]
        total = max(sum(int(carriers.get(k, 0)) for k in ("first", "delimiter", "other")), 1)
        sec.findings.append(
            f"Massive activations: the largest |h| is {top:,.1f} at state {names[s]} ({where}), "
            f"{ratio[s]:,.0f}x that state's median |h| of {m.median_abs[s]:.3g}; "
            f"{int(m.n_massive[s]):,} activations there exceed {MASSIVE_MAX}, "
            f"{_pct(int(carriers.get('first', 0)) / total)} on the first token and "
            f"{_pct(int(carriers.get('delimiter', 0)) / total)} on delimiters."
        )
        sec.findings.append(
            f"States with massive activations: {_states(massive_states)} of {len(names)}."
        )
    else:
        sec.findings.append(
            f"No massive activations (|h| > {MASSIVE_MAX}) at any state; the largest |h| is "
            f"{top:,.2f} at state {names[s]} ({where}), {ratio[s]:,.0f}x its median."
        )
    if scan.sinks is not None:
        sinks = scan.sinks
        layer = int(np.argmax(sinks.share_per_layer))
        sec.findings.append(
            f"Attention sinks: {_pct(sinks.share)} of (layer, head) pairs put more than "
            f"{sinks.threshold:g} of their attention on the first token on average (alpha, Gu et al. "
            "2024)"
            + (
                f"; most in layer {layer + 1} ({_pct(float(sinks.share_per_layer[layer]))} of its heads)."
                if sinks.share > 0
                else "."
            )
        )
    sec.notes.extend(scan.notes)
    sec.notes.append(f"Measured on the first {len(texts)} texts of the corpus.")
    from isoscope.plots.massive import massive_summary_figure

    sec.figures.append(massive_summary_figure(m, scan.sinks))
    return sec


BUILDERS: dict[str, Callable[[Context], Section]] = {
    "outliers": _outliers,
    "anisotropy": _anisotropy,
    "layernorm": _layernorm,
    "positional": _positional,
    "similarity": _similarity,
    "massive": _massive,
}
