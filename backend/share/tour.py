"""The guided tour: the five papers' central claims in order, each checked live on a model.

Each step function returns a :class:`TourStep`: the claim in one sentence with its citation, the
live numbers and figure, whether this model agrees (True / False / None = the claim does not apply),
the verdict in one sentence, and one thing to try in the app. The numbers come from the existing
analyses (outliers, isotropy, layernorm + ablation, positional probe, nope); this module only
decides what agreeing means, in the ``agrees`` rule each docstring states.

1. Outlier dims and clipping: Luo, Kulmizev & Mao 2021 (arXiv 2011.04393); Timkey & van Schijndel
   2021 (arXiv 2109.04404).
2. LayerNorm outliers and their ablation: Kovaleva et al. 2021, BERT Busters (arXiv 2105.06990).
3. Anisotropy, trained vs random init: Ethayarajh 2019 (arXiv 1909.00512); Godey, de la Clergerie
   & Sagot 2024 (arXiv 2401.12143).
4. Where position lives: Luo et al. 2021 section 4 (a linear probe on the hidden states).
5. Variance shrinkage without position embeddings: Chi et al. 2023 (arXiv 2305.13571).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from isoscope.analysis.layernorm.thresholds import RANDOM_CONTROLS

TITLES = (
    "Outlier dimensions, and what clipping them does",
    "LayerNorm outliers, and what ablating them breaks",
    "Anisotropy: trained vs random initialisation",
    "Where position lives",
    "Variance shrinkage without position embeddings",
)


@dataclass
class TourStep:
    """One step: claim + citation, live numbers and figure, verdict, one thing to try."""

    number: int
    title: str
    claim: str
    citation: str
    try_this: str
    agrees: bool | None = None
    verdict: str = ""
    metrics: list[tuple[str, str, str | None]] = field(default_factory=list)  # label, value, delta
    figure: Any = None


def outliers_step(result) -> TourStep:
    """Agrees when some dim is an outlier and zeroing the outlier dims of the state where it is
    strongest removes at least half of that state's anisotropy."""
    from isoscope.analysis.anisotropy import anisotropy_by_state, clipped_anisotropy_by_state
    from isoscope.analysis.outliers import criteria_by_state, outlier_dims_by_state
    from isoscope.plots.outliers import headline_outlier
    from isoscope.plots.overview import anisotropy_line, anisotropy_with_lines

    step = TourStep(
        1,
        TITLES[0],
        "A handful of hidden dimensions with huge means dominate BERT-style representations and their "
        "cosine similarity; zeroing (clipping) them removes most of the anisotropy.",
        "Luo, Kulmizev & Mao 2021, arXiv 2011.04393; Timkey & van Schijndel 2021, arXiv 2109.04404",
        "Open **Clipping & projections** at the state named above: before clipping, PCA shows one "
        "long streak along the outlier dim; after clipping the rest of the geometry shows.",
    )
    names = result.state_names
    criteria = criteria_by_state(result)
    headline = headline_outlier(result, criteria)
    raw = anisotropy_by_state(result)
    if headline is None:
        step.agrees = False
        step.verdict = "No dimension is an outlier at any hidden state of this model."
        step.figure = anisotropy_line(names, raw, name="raw")
        return step
    dim = headline["dim"]
    s = names.index(headline["state"])
    dims_by_state = outlier_dims_by_state(result, criteria=criteria)
    clipped = clipped_anisotropy_by_state(result, dims_by_state)
    alone = clipped_anisotropy_by_state(result, [[dim]] * result.num_states)
    share = float(max(result.argmin_freq[s, dim], result.argmax_freq[s, dim]))
    step.metrics = [
        (f"|mean| of dim {dim} at state {names[s]}", f"{abs(headline['mean']):.2f}",
         f"typical {headline['typical']:.2f}"),
        ("tokens whose min/max it holds", f"{100 * share:.0f} %", None),
        (f"anisotropy at state {names[s]}", f"{raw[s]:.3f}", None),
        (f"… dim {dim} zeroed", f"{alone[s]:.3f}", f"{alone[s] - raw[s]:+.3f}"),
        (f"… all {len(dims_by_state[s])} outlier dims zeroed", f"{clipped[s]:.3f}",
         f"{clipped[s] - raw[s]:+.3f}"),
    ]  # fmt: skip
    step.agrees = bool(np.isfinite(raw[s]) and clipped[s] <= 0.5 * raw[s])
    step.verdict = (
        f"At state {names[s]}, zeroing the outlier dims ({', '.join(map(str, dims_by_state[s]))}) "
        f"takes the anisotropy from {raw[s]:.3f} to {clipped[s]:.3f}"
        + (" — more than half of it goes." if step.agrees else " — less than half of it goes.")
    )
    step.figure = anisotropy_with_lines(
        names,
        raw,
        [
            (alone, f"dim {dim} zeroed", "dot"),
            (clipped, "each state's outlier dims zeroed", "dash"),
        ],
    )
    return step


def layernorm_step(
    loaded, texts, *, random_controls: int = RANDOM_CONTROLS.default, max_length: int = 64
) -> TourStep:
    """Agrees when LayerNorm outlier dims exist and zeroing them moves the final sentence embedding
    further (lower cosine to the original) than every random control of the same size."""
    from isoscope.analysis.layernorm.ablation import run_ablation
    from isoscope.analysis.layernorm.params import ln_outliers
    from isoscope.engine.errors import IsoscopeError
    from isoscope.plots.layernorm import ablation_vs_controls

    step = TourStep(
        2,
        TITLES[1],
        "Outlier dimensions come from a few LayerNorm scaling and bias parameters; disabling those few "
        "parameters wrecks the model, while disabling as many random dimensions does almost nothing.",
        "Kovaleva, Kulshreshtha, Rogers & Rumshisky 2021, BERT Busters, arXiv 2105.06990",
        "On the **LayerNorm** page, type a single dim (e.g. the first one above) in the ablation lab "
        "and compare it with the random controls.",
    )
    try:
        detection = ln_outliers(loaded)
    except IsoscopeError as exc:
        step.verdict = f"Does not apply: {exc}"
        return step
    if not detection.dims:
        step.agrees = None if loaded.info.random_init else False
        step.verdict = "This model has no LayerNorm outlier dims" + (
            " (random init: every gamma is 1 and every beta 0), so there is nothing to ablate."
            if loaded.info.random_init
            else "."
        )
        return step
    report = run_ablation(
        loaded,
        list(texts),
        detection.dims,
        random_controls=random_controls,
        max_length=max_length,
    )
    final = float(report.effect.embedding_cosine[-1])
    controls = [float(e.embedding_cosine[-1]) for _, e in report.controls]
    step.metrics = [
        ("LayerNorm outlier dims", ", ".join(map(str, detection.dims)), None),
        ("final-state cosine to the original", f"{final:.3f}", "after the ablation"),
    ]
    if controls:
        step.metrics.append(("random controls", f"{min(controls):.3f}–{max(controls):.3f}", None))
        step.agrees = final < min(controls)
    step.verdict = (
        f"Zeroing {len(detection.dims)} dims in {len(report.norms)} LayerNorms leaves a sentence "
        f"embedding with cosine {final:.3f} to the original"
        + (
            f"; {len(controls)} random {len(detection.dims)}-dim controls stay at "
            f"{min(controls):.3f}–{max(controls):.3f}."
            if controls
            else "."
        )
    )
    step.figure = ablation_vs_controls(report, "embedding_cosine")
    return step


def anisotropy_step(result, random_result, model_is_random: bool = False) -> TourStep:
    """Agrees when the model is anisotropic (highest mean cosine >= 0.1) and more so in some layer
    than at ``emb``. The random-init copy on the same texts and pairs says whether training or the
    architecture made it so."""
    from isoscope.analysis.anisotropy import anisotropy_by_state
    from isoscope.plots.overview import trained_vs_random_figure

    step = TourStep(
        3,
        TITLES[2],
        "Contextual token vectors are anisotropic: two random tokens from different texts have a "
        "clearly positive cosine, more so in the upper layers than at the embeddings; comparing with "
        "the same architecture at random initialisation separates what training did from what the "
        "architecture does.",
        "Ethayarajh 2019, arXiv 1909.00512; Godey, de la Clergerie & Sagot 2024, arXiv 2401.12143",
        "On the **Anisotropy** page, switch on *Compare with random-init weights* and look at the "
        "cosine histograms layer by layer.",
    )
    trained = anisotropy_by_state(result)
    random = anisotropy_by_state(random_result)
    names = result.state_names
    top = int(np.nanargmax(trained))
    t, r = float(trained[top]), float(np.nanmax(random))
    step.metrics = [
        (f"anisotropy at {names[0]}", f"{trained[0]:.3f}", None),
        ("highest, this model", f"{t:.3f}", f"state {names[top]}"),
        ("highest, random-init copy", f"{r:.3f}", f"{r - t:+.3f}"),
    ]
    step.agrees = bool(t >= 0.1 and top > 0)
    effect = (
        "training raised it"
        if t >= r + 0.05
        else "the random-init architecture is already at least as anisotropic, so training did not "
        "create it here"
        if r >= t
        else "training changed it little"
    )
    step.verdict = (
        f"Mean cosine {trained[0]:.3f} at {names[0]}, up to {t:.3f} at state {names[top]}; the random-init "
        f"copy on the same texts reaches {r:.3f}: {effect}."
    )
    if model_is_random:
        step.agrees = None
        step.verdict = (
            "The loaded model is itself randomly initialised: load a trained model (the default) to "
            "test the claim."
        )
    step.figure = trained_vs_random_figure(names, trained, random)
    return step


def position_step(loaded, result, max_position: int = 64) -> TourStep:
    """Agrees when the probe reads position at ``emb`` with at least twice the majority baseline and
    loses accuracy towards the last state."""
    from isoscope.analysis.positional.table import ProbeSettings, probe_result
    from isoscope.engine.errors import InputError
    from isoscope.plots.positional import probe_accuracy_line

    step = TourStep(
        4,
        TITLES[3],
        "Absolute position is linearly readable from the token vectors: almost perfectly after the "
        "embedding layer, then less and less with depth, as the layers mix it into the content.",
        "Luo, Kulmizev & Mao 2021, arXiv 2011.04393 (section 4)",
        "On the **Positional information** page, open the TUPE tab: how much of the first layer's "
        "attention is position talking to position?",
    )
    try:
        probe = probe_result(
            result, ProbeSettings(max_position=min(max_position, result.settings.max_length))
        )
    except InputError as exc:
        step.verdict = f"Does not apply: {exc}"
        return step
    acc = probe.accuracy
    names = result.state_names
    step.metrics = [
        (f"probe accuracy at {names[0]}", f"{acc[0]:.2f}", f"baseline {probe.chance:.2f}"),
        (f"probe accuracy at {names[-1]}", f"{acc[-1]:.2f}", f"{acc[-1] - acc[0]:+.2f}"),
        ("position embeddings", str(loaded.info.position_embedding), None),
    ]
    step.agrees = bool(acc[0] >= 2 * probe.chance and acc[-1] < acc[0])
    step.verdict = (
        f"A linear probe reads the position of held-out tokens with accuracy {acc[0]:.2f} at "
        f"{names[0]} and {acc[-1]:.2f} at the last state (majority baseline {probe.chance:.2f})."
    )
    step.figure = probe_accuracy_line(names, probe.accuracy, probe.train_accuracy, probe.chance)
    return step


def nope_step(
    d_model: int = 128, layers: int = 2, heads: int = 4, seq_len: int = 256, seeds: int = 2
) -> TourStep:
    """Agrees when layer 1's attention-output variance falls with log-log slope in [-1.3, -0.7]
    (theory -1) under the causal mask and within ±0.2 of flat under the bidirectional one."""
    from isoscope.analysis.positional.nope import NopeSettings, variance_lab_pair
    from isoscope.plots.positional import variance_plot

    step = TourStep(
        5,
        TITLES[4],
        "A causal Transformer without any position embeddings still knows where it is: at position m "
        "the attention output averages m values, so its variance shrinks like 1/m.",
        "Chi, Fan, Chen, Rudnicky & Ramadge 2023, arXiv 2305.13571",
        "In the variance lab on the **Positional information** page, raise the init std to 0.2: "
        "queries and keys are no longer tiny, attention is no longer uniform, and the 1/m law bends.",
    )
    settings = NopeSettings(
        d_model=d_model, layers=layers, heads=heads, seq_len=seq_len, seeds=seeds
    )
    causal, bidirectional = variance_lab_pair(settings)
    slope, flat = float(causal.slopes[0]), float(bidirectional.slopes[0])
    step.metrics = [
        ("log-log slope, causal, layer 1", f"{slope:+.2f}", "theory -1"),
        ("log-log slope, bidirectional, layer 1", f"{flat:+.2f}", "theory 0"),
    ]
    step.agrees = bool(-1.3 <= slope <= -0.7 and abs(flat) <= 0.2)
    step.verdict = (
        f"In {seeds} random NoPE GPT-2 models (width {d_model}, {layers} layers, {seq_len} tokens) the "
        f"attention-output variance falls with slope {slope:+.2f}; without the causal mask: {flat:+.2f}."
        " This step measures random models, the setting of the paper, not the loaded one."
    )
    step.figure = variance_plot(
        causal, title="Attention-output variance vs position (causal, no PE)"
    )
    return step
