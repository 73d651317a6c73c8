"""A shareable report: findings written from the measured numbers, the key figure of each page, the
model card, the corpus, the settings and the isoscope version, as one self-contained offline HTML
file (plotly.js inlined once).

Every number comes from an existing analysis (never re-derived here):

- outlier dims: :mod:`backend.analysis.geometry.outliers` (Luo et al. 2021, arXiv 2011.04393; Timkey & van Schijndel
  2021, arXiv 2109.04404) and :func:`backend.plots.outliers.headline_outlier`;
- anisotropy and clipping: :mod:`backend.analysis.geometry.isotropy` (Ethayarajh 2019, arXiv 1909.00512; Timkey's
  per-dimension split; IsoScore, Rudman et al. 2022) and :func:`backend.analysis.geometry.projections.before_after`;
- LayerNorm outliers and their ablation against random controls: :mod:`backend.analysis.layernorm.params`,
  :func:`backend.analysis.layernorm.ablation.run_ablation` (Kovaleva et al. 2021, BERT Busters, arXiv 2105.06990);
- positional information: :mod:`backend.analysis.positional.table` (Luo et al. section 4);
- sentence similarity (with ``pairs``): :mod:`backend.analysis.geometry.similarity`;
- massive activations and attention sinks, for decoders: ``backend.analysis.decoder.massive`` /
  ``backend.analysis.decoder.sinks``.

A section that does not apply (no LayerNorm outliers, no position table, an encoder for the decoder
section, no pairs) is kept as one line saying why; a section whose analysis raises is kept as one line
naming the error. The report as a whole never fails. The HTML holds no timestamp and fixed figure ids,
so the same model, corpus and settings give the same bytes (the CLI and the app's download agree).
"""

from __future__ import annotations

import html
import json
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go

from backend.analysis.geometry.isotropy import N_PAIRS, PAIR_SEED
from backend.engine.errors import InputError, IsoscopeError

Progress = Callable[[int, int], None]

SECTION_TITLES = {
    "outliers": "Outlier dimensions",
    "anisotropy": "Anisotropy and what clipping does",
    "layernorm": "LayerNorm outliers and their ablation",
    "positional": "Positional information",
    "similarity": "Sentence similarity",
    "decoder": "Massive activations and attention sinks",
}
SECTIONS = tuple(SECTION_TITLES)
QUICK_SECTIONS = ("outliers", "anisotropy")  # no forward pass: the Overview shows them at once

SOURCES = {
    "outliers": "Luo, Kulmizev & Mao 2021, arXiv 2011.04393; Timkey & van Schijndel 2021, arXiv 2109.04404",
    "anisotropy": "Ethayarajh 2019, arXiv 1909.00512; Timkey & van Schijndel 2021, arXiv 2109.04404; "
    "Rudman et al. 2022, arXiv 2108.07344; Luo et al. 2021, arXiv 2011.04393",
    "layernorm": "Kovaleva, Kulshreshtha, Rogers & Rumshisky 2021 (BERT Busters), arXiv 2105.06990",
    "positional": "Luo, Kulmizev & Mao 2021, arXiv 2011.04393 (section 4)",
    "similarity": "Luo et al. 2021, Table 2; Timkey & van Schijndel 2021",
    "decoder": "Sun, Chen, Kolter & Liu 2024, Massive Activations, arXiv 2402.17762; "
    "Xiao et al. 2023, attention sinks, arXiv 2309.17453",
}


@dataclass(frozen=True)
class ReportSettings:
    """Parameters of the report's analyses (the ones the pages use by default)."""

    pairs: int = N_PAIRS  # random different-text token pairs for anisotropy
    seed: int = PAIR_SEED
    ablation_texts: int = 64  # texts the LayerNorm ablation runs on
    random_controls: int = 3
    probe_max_position: int = 64
    probe_iter: int = 30
    projection_points: int = 2000
    decoder_texts: int = 64  # texts of the massive-activation / sink scan

    def __post_init__(self) -> None:
        if self.pairs < 1:
            raise InputError(f"anisotropy pairs must be at least 1, got {self.pairs}")
        if not 2 <= self.ablation_texts <= 50_000:
            raise InputError(
                f"ablation texts must be between 2 and 50,000, got {self.ablation_texts}"
            )
        if not 0 <= self.random_controls <= 100:
            raise InputError(
                f"random controls must be between 0 and 100, got {self.random_controls}"
            )
        if not 2 <= self.probe_max_position <= 8192:
            raise InputError(
                f"probe max position must be between 2 and 8192, got {self.probe_max_position}"
            )


@dataclass
class Section:
    """One report section: findings (sentences), figures, tables; or ``skipped``, one line why not."""

    key: str
    title: str
    findings: list[str] = field(default_factory=list)
    figures: list[Any] = field(default_factory=list)  # plotly Figures
    tables: list[tuple[str, list[dict]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None
    source: str = ""


@dataclass
class Report:
    """Everything the HTML shows; :meth:`to_html` renders it, :meth:`to_json` gives the findings."""

    model: dict
    corpus: dict
    settings: dict
    version: str
    sections: list[Section]

    def section(self, key: str) -> Section | None:
        return next((s for s in self.sections if s.key == key), None)

    def findings(self) -> list[tuple[str, str]]:
        """(section title, sentence) for every finding, in section order."""
        return [(s.title, f) for s in self.sections if s.skipped is None for f in s.findings]

    def to_json(self) -> dict:
        return {
            "version": self.version,
            "model": self.model,
            "corpus": self.corpus,
            "settings": self.settings,
            "sections": [
                {
                    "key": s.key,
                    "title": s.title,
                    "findings": s.findings,
                    "skipped": s.skipped,
                    "notes": s.notes,
                    "source": s.source,
                }
                for s in self.sections
            ],
        }

    def to_html(self) -> str:
        return render_html(self)


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
class _Context:
    """What several sections share, computed once (raw/clipped anisotropy, outlier dims)."""

    loaded: Any
    result: Any
    settings: ReportSettings
    pairs: tuple[list[str], list[str], list[float]] | None
    in_place: bool
    cache: dict = field(default_factory=dict)

    def once(self, name: str, compute: Callable[[], Any]) -> Any:
        if name not in self.cache:
            self.cache[name] = compute()
        return self.cache[name]

    @property
    def outliers_by_state(self) -> list[list[int]]:
        from backend.analysis.geometry.outliers import outlier_dims

        r = self.result
        return self.once("dims", lambda: [outlier_dims(r, s) for s in range(r.num_states)])

    @property
    def criteria_by_state(self) -> list[dict[str, list[int]]]:
        from backend.analysis.geometry.outliers import OutlierThresholds
        from backend.plots.outliers import all_states_outliers

        return self.once("criteria", lambda: all_states_outliers(self.result, OutlierThresholds()))

    @property
    def isotropy(self):
        from backend.analysis.geometry.isotropy import by_state

        s = self.settings
        return self.once(
            "iso", lambda: by_state(self.result, n_pairs=s.pairs, seed=s.seed, similarity=False)
        )

    def clipped(self, dims_by_state: list[list[int]]) -> np.ndarray:
        from backend.analysis.geometry.isotropy import clipped_anisotropy_by_state

        key = "clipped" + repr(dims_by_state)
        s = self.settings
        return self.once(
            key,
            lambda: clipped_anisotropy_by_state(
                self.result, dims_by_state, n_pairs=s.pairs, seed=s.seed
            ),
        )


# ----------------------------------------------------------------------------- sections


def _outliers(ctx: _Context) -> Section:
    from backend.plots.outliers import criteria_marks, headline_outlier, layer_dim_heatmap

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


def _anisotropy(ctx: _Context) -> Section:
    import plotly.graph_objects as go

    from backend.plots.overview import anisotropy_line

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
    fig = anisotropy_line(names, raw, name="raw")
    fig.add_trace(
        go.Scatter(
            x=list(names),
            y=[float(v) for v in clipped],
            mode="lines+markers",
            name="outlier dims zeroed",
            line=dict(dash="dash"),
        )
    )
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    sec.figures.append(fig)
    at = with_dims[-1] if with_dims else None
    if at is not None:
        sec.figures.append(_clip_projection(ctx, at, dims_by_state[at]))
    return sec


def _clip_projection(ctx: _Context, state: int, dims: list[int]):
    """PCA of the token sample at ``state``, raw and with ``dims`` zeroed (the projections page)."""
    from backend.analysis.geometry.projections import (
        before_after,
        hover_contexts,
        projection_sample,
        token_colouring,
    )
    from backend.plots.projections import before_after_figure

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


def _layernorm(ctx: _Context) -> Section:
    from backend.analysis.layernorm.ablation import run_ablation
    from backend.analysis.layernorm.params import ln_outliers, norms_of, select_norms
    from backend.plots.layernorm import ablation_vs_controls

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
    texts = list(ctx.result.texts[: ctx.settings.ablation_texts])
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
    final = float(report.effect.embedding_cosine[-1])
    controls = [float(e.embedding_cosine[-1]) for _, e in report.controls]
    text = (
        f"Zeroing them in {len(norms)} LayerNorms ({', '.join(norms)}) leaves a final-state sentence "
        f"embedding with cosine {final:.3f} to the original (mean over {len(texts)} texts)"
    )
    if controls:
        drift, control_drift = 1 - final, 1 - float(np.mean(controls))
        verdict = (
            "more damage than any random control"
            if final < min(controls)
            else "no more damage than random dims"
        )
        ratio = f", {drift / control_drift:.1f}x their mean drift" if control_drift > 0 else ""
        text += (
            f"; {len(controls)} random {len(dims)}-dim controls give {min(controls):.3f}–{max(controls):.3f}: "
            f"{verdict}{ratio}."
        )
    else:
        text += "."
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


def _positional(ctx: _Context) -> Section:
    from backend.analysis.positional.table import (
        ProbeSettings,
        analyse_position_table,
        position_offset,
        position_table_weights,
        probe_result,
    )
    from backend.engine.models import position_table
    from backend.plots.positional import probe_accuracy_line

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


def _similarity(ctx: _Context) -> Section:
    from backend.analysis.geometry.similarity import (
        SentencePairs,
        clip_dims_by_state,
        pool_pairs,
        sts_by_state,
    )
    from backend.plots.similarity import sts_figure

    sec = Section("similarity", SECTION_TITLES["similarity"], source=SOURCES["similarity"])
    if ctx.pairs is None:
        sec.skipped = (
            "no sentence pairs given (the CLI's --pairs CSV with sentence1,sentence2,score)"
        )
        return sec
    left, right, gold = ctx.pairs
    pairs = SentencePairs(tuple(left), tuple(right), np.asarray(gold, dtype=np.float64), "pairs")
    s = ctx.result.settings
    first, second = pool_pairs(ctx.loaded, pairs, s.max_length, s.batch_size)
    clip = clip_dims_by_state("auto", first, second)
    rows = sts_by_state(first, second, pairs.scores, clip, state_names=ctx.result.state_names)
    final = rows[-1]
    best = max(rows, key=lambda row: row["raw"] if np.isfinite(row["raw"]) else -np.inf)
    sec.findings.append(
        f"STS Spearman × 100 on {len(left):,} pairs: {final['raw']:.1f} at the final state "
        f"({final['clipped']:.1f} with its two largest-|mean| dims {_dims(final['clipped_dims'])} zeroed); "
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


def _decoder(ctx: _Context) -> Section:
    """Massive activations (Sun et al. 2024) and attention sinks (Xiao et al. 2023; Gu et al. 2024's
    alpha) from :func:`backend.analysis.decoder.massive.scan_decoder`, when this build has it."""
    sec = Section("decoder", SECTION_TITLES["decoder"], source=SOURCES["decoder"])
    loaded = ctx.loaded
    if not loaded.info.is_causal:
        sec.skipped = (
            "the model is an encoder (bidirectional attention); massive activations and attention "
            "sinks are reported for decoders"
        )
        return sec
    try:
        from backend.analysis.decoder.massive import peak_state, scan_decoder
    except ImportError as exc:
        if getattr(exc, "name", "") not in (
            "backend.analysis.decoder.massive",
            "backend.analysis.decoder.sinks",
        ):
            raise
        sec.skipped = "this isoscope build has no massive-activation or attention-sink analysis"
        return sec
    texts = list(ctx.result.texts[: ctx.settings.decoder_texts])
    scan = scan_decoder(
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
            f"{int(m.n_massive[s]):,} activations there exceed max(100, 1000 x median), "
            f"{_pct(int(carriers.get('first', 0)) / total)} on the first token and "
            f"{_pct(int(carriers.get('delimiter', 0)) / total)} on delimiters."
        )
        sec.findings.append(
            f"States with massive activations: {_states(massive_states)} of {len(names)}."
        )
    else:
        sec.findings.append(
            f"No massive activations (|h| > max(100, 1000 x median)) at any state; the largest |h| is "
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
    sec.figures.append(_massive_figure(m, scan.sinks))
    return sec


def _massive_figure(m, sinks):
    """Top |h| and median |h| per hidden state (log scale); sink share per layer when measured."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = list(m.state_names)
    cols = 2 if sinks is not None else 1
    fig = make_subplots(
        rows=1,
        cols=cols,
        subplot_titles=["largest and median |h| per hidden state"]
        + (["share of heads that are attention sinks"] if sinks is not None else []),
    )
    fig.add_trace(
        go.Scatter(x=names, y=m.top_value[:, 0], mode="lines+markers", name="largest |h|"),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=names, y=m.median_abs, mode="lines+markers", name="median |h|", line=dict(dash="dot")
        ),
        row=1,
        col=1,
    )
    fig.update_yaxes(type="log", title_text="|h|", row=1, col=1)
    if sinks is not None:
        fig.add_trace(
            go.Bar(
                x=[str(i + 1) for i in range(len(sinks.share_per_layer))],
                y=sinks.share_per_layer,
                name="sink share",
            ),
            row=1,
            col=2,
        )
        fig.update_yaxes(range=[0, 1], title_text="share of heads", row=1, col=2)
    fig.update_xaxes(type="category", title_text="hidden state / layer")
    fig.update_layout(height=360, margin=dict(l=50, r=20, t=50, b=40))
    return fig


BUILDERS: dict[str, Callable[[_Context], Section]] = {
    "outliers": _outliers,
    "anisotropy": _anisotropy,
    "layernorm": _layernorm,
    "positional": _positional,
    "similarity": _similarity,
    "decoder": _decoder,
}


# ----------------------------------------------------------------------------- building


def build_report(
    loaded,
    result,
    *,
    settings: ReportSettings | None = None,
    pairs: tuple[Sequence[str], Sequence[str], Sequence[float]] | None = None,
    sections: Sequence[str] = SECTIONS,
    in_place: bool = False,
    progress: Progress | None = None,
) -> Report:
    """Run every section on ``loaded`` and its extraction ``result``; never raises for a section.

    ``pairs`` = (sentences A, sentences B, gold scores) adds STS figures. ``in_place=True`` lets the
    LayerNorm ablation modify the model (restored bit-for-bit) instead of a private copy: only for a
    process that owns the model, like the CLI.
    """
    from backend import __version__

    settings = settings or ReportSettings()
    unknown = [s for s in sections if s not in BUILDERS]
    if unknown:
        raise InputError(
            f"unknown report section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}"
        )
    ctx = _Context(
        loaded,
        result,
        settings,
        None if pairs is None else tuple(list(x) for x in pairs),
        in_place,
    )
    built = []
    for i, key in enumerate(sections):
        try:
            built.append(BUILDERS[key](ctx))
        except IsoscopeError as exc:
            built.append(Section(key, SECTION_TITLES[key], skipped=str(exc), source=SOURCES[key]))
        except Exception as exc:  # a bug in one analysis must not lose the others
            last = traceback.extract_tb(exc.__traceback__)[-1]
            built.append(
                Section(
                    key,
                    SECTION_TITLES[key],
                    skipped=f"could not be computed ({type(exc).__name__}: {str(exc)[:200]} at "
                    f"{last.filename.rsplit('/', 1)[-1]}:{last.lineno})",
                    source=SOURCES[key],
                )
            )
        if progress is not None:
            progress(i + 1, len(sections))
    return Report(
        model=dict(result.model),
        corpus={
            "name": result.corpus_name,
            "sha256": result.corpus_sha,
            "num_texts": result.num_texts,
            "num_tokens": result.num_tokens,
            "token_sample": len(result.sample_index),
            "sentence_pairs": 0 if pairs is None else len(ctx.pairs[0]),
            "notices": list(result.notices),
        },
        settings={"extraction": result.settings.to_dict(), "report": asdict(settings)},
        version=__version__,
        sections=built,
    )


# ----------------------------------------------------------------------------- HTML

_CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, Roboto, sans-serif; margin: 0; color: #1d1d1f;
       background: #fafafa; line-height: 1.5; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 32px 64px; background: #fff; }
h1 { margin-bottom: 0; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 40px; }
.meta { color: #555; margin-top: 4px; }
nav ol { columns: 2; } nav a { text-decoration: none; }
ul.findings li { margin-bottom: 6px; }
.skipped { color: #666; font-style: italic; }
.note { color: #555; font-size: 0.92em; }
.source { color: #555; font-size: 0.88em; margin-top: 8px; }
table { border-collapse: collapse; margin: 12px 0; font-size: 0.92em; }
th, td { border: 1px solid #ddd; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
.figure { margin: 16px 0; }
footer { color: #777; font-size: 0.85em; margin-top: 48px; }
"""


def _table(rows: list[dict]) -> str:
    if not rows:
        return ""
    columns = list(rows[0])
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(row.get(c, '')))}</td>" for c in columns) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure_html(fig, div_id: str) -> str:
    try:
        # Plotly's own template, whatever the process default (Streamlit installs its own): the
        # app's download and the CLI then write the same bytes.
        fig = go.Figure(fig).update_layout(template="plotly")
        return fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=div_id,
            config={"displaylogo": False, "responsive": True},
        )
    except Exception as exc:  # one broken figure must not lose the report
        return f'<p class="skipped">Figure not rendered ({html.escape(type(exc).__name__)}).</p>'


def _section_html(section: Section) -> str:
    parts = [f'<section id="{section.key}"><h2>{html.escape(section.title)}</h2>']
    if section.skipped is not None:
        parts.append(f'<p class="skipped">Left out: {html.escape(section.skipped)}.</p>')
    else:
        if section.findings:
            items = "".join(f"<li>{html.escape(f)}</li>" for f in section.findings)
            parts.append(f'<ul class="findings">{items}</ul>')
        for note in section.notes:
            parts.append(f'<p class="note">{html.escape(note)}</p>')
        for i, fig in enumerate(section.figures):
            parts.append(f'<div class="figure">{_figure_html(fig, f"fig-{section.key}-{i}")}</div>')
        for caption, rows in section.tables:
            parts.append(f"<h3>{html.escape(caption)}</h3>{_table(rows)}")
    if section.source:
        parts.append(f'<p class="source">Sources: {html.escape(section.source)}.</p>')
    parts.append("</section>")
    return "\n".join(parts)


def render_html(report: Report) -> str:
    """One self-contained HTML page: plotly.js inlined once, no network access needed."""
    from plotly.offline import get_plotlyjs

    from backend.plots.overview import model_card_rows

    model = report.model
    name = str(model.get("display_name") or model.get("source"))
    corpus = report.corpus
    findings = report.findings()
    toc = "".join(
        f'<li><a href="#{s.key}">{html.escape(s.title)}</a>'
        + (" (left out)" if s.skipped is not None else "")
        + "</li>"
        for s in report.sections
    )
    summary = (
        "".join(
            f"<li><b>{html.escape(title)}:</b> {html.escape(text)}</li>" for title, text in findings
        )
        or "<li>No findings could be computed.</li>"
    )
    corpus_rows = [
        {"field": "name", "value": corpus["name"]},
        {"field": "texts", "value": f"{corpus['num_texts']:,}"},
        {"field": "tokens analysed", "value": f"{corpus['num_tokens']:,}"},
        {"field": "token sample (pairwise metrics)", "value": f"{corpus['token_sample']:,}"},
        {"field": "sentence pairs", "value": f"{corpus['sentence_pairs']:,}"},
        {"field": "SHA-256 (first 20 hex)", "value": corpus["sha256"]},
    ] + [{"field": "notice", "value": n} for n in corpus["notices"]]
    settings_rows = [
        {"setting": f"{group}.{k}", "value": json.dumps(v)}
        for group, values in report.settings.items()
        for k, v in values.items()
    ]
    body = "\n".join(
        [
            "<main>",
            f"<h1>isoscope report: {html.escape(name)}</h1>",
            f'<p class="meta">{html.escape(str(model.get("architecture")))} · {model.get("num_layers")} layers · '
            f"width {model.get('hidden_size')} · corpus {html.escape(str(corpus['name']))} "
            f"({corpus['num_texts']:,} texts, {corpus['num_tokens']:,} "
            f"tokens) · isoscope {html.escape(report.version)}</p>",
            f'<nav><ol><li><a href="#findings">Findings</a></li>{toc}'
            '<li><a href="#model">Model card</a></li><li><a href="#corpus">Corpus</a></li>'
            '<li><a href="#settings">Settings</a></li></ol></nav>',
            f'<section id="findings"><h2>Findings</h2><ul class="findings">{summary}</ul></section>',
            *(_section_html(s) for s in report.sections),
            f'<section id="model"><h2>Model card</h2>{_table(model_card_rows(model))}</section>',
            f'<section id="corpus"><h2>Corpus</h2>{_table(corpus_rows)}</section>',
            f'<section id="settings"><h2>Settings</h2>{_table(settings_rows)}</section>',
            f"<footer>Written by isoscope {html.escape(report.version)} from measured numbers; hidden states "
            "are named emb (the embedding output) and 1 … L. Hidden state indices, dims and pairs are "
            "0-based; every analysis is seeded.</footer>",
            "</main>",
        ]
    )
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>isoscope report: {html.escape(name)}</title><style>{_CSS}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>\n'
        f"<body>\n{body}\n</body></html>\n"
    )
