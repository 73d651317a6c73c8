"""The Position probe tab: a linear position probe per hidden state and its neuron
contributions (Luo et al. 2021, section 4); image models get the row / column probe."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from isoscope.analysis.positional import table as positional_table
from isoscope.analysis.positional.params import MAX_POSITION, PROBE_ITER, TEST_FRACTION
from isoscope.analysis.positional.table import (
    ProbeResult,
    ProbeSettings,
    contribution_table,
)
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.params import SEED
from isoscope.plots import positional as plots
from isoscope.ui.frame.literal import message
from isoscope.ui.frame.page import explainer, load_or_stop, show_notices
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.views.positional.grid import grid_probe_view
from isoscope.ui.views.positional.shared import SOURCES, outliers_by_name
from isoscope.ui.widgets.charts import chart_with_downloads
from isoscope.ui.widgets.controls import choice_slider, interval_number, interval_slider
from isoscope.ui.work.cached import heavy


@heavy("Training position probes:")
def probe_result(result: ExtractionResult, settings: ProbeSettings, *, progress) -> ProbeResult:
    """Linear position probes per hidden state (Luo et al. 2021, section 4)."""
    return positional_table.probe_result(result, settings, progress)


def probe_tab() -> None:
    """Linear position probe per hidden state and its neuron contributions (Luo et al., section 4)."""
    loaded, result = load_or_stop()
    if result.input_kind == "image":
        grid_probe_view(result)
        return
    if result.input_kind == "audio":
        audio_probe_caption(result)
    probe_explainer()
    show_notices(result)
    try:
        probe = probe_result(result, probe_settings(result))
    except IsoscopeError as exc:
        st.error(message(exc))
    else:
        probe_accuracy_view(probe)
        probe_contribution_view(result, probe)


def audio_probe_caption(result: ExtractionResult) -> None:
    fps = result.model.get("frames_per_second")
    st.caption(
        "Audio: a frame's position is its index in the clip"
        + (f" ({1000 / fps:g} ms per frame)" if fps else "")
        + ", and clips (not frames) are split into training and held-out sets."
    )


def probe_explainer() -> None:
    explainer(
        "What is this / references",
        f"""
A **position probe** (Luo et al., section 4) is a linear classifier without bias that reads a token vector and
predicts the token's absolute position. High held-out accuracy means position is linearly decodable from that
hidden state. The probe is trained per hidden state on the extraction's token sample; texts (not tokens) are split
into training and held-out sets, so a text never appears on both sides. Positions at or beyond *max position* are
left out (not merged), and special tokens are excluded by default ([CLS] always sits at position 0, so its
identity would give its position away).

**Neuron contribution** c(i) = mean over held-out tokens of |w_(y,i) · v_i|, the weight of the true position's
class times the activation (raw coordinates, no standardisation, so that outlier neurons keep their size).
Outlier dimensions of the hidden state are red. The baseline is always predicting the most frequent position.
Fit: multinomial logistic loss, small L2 penalty, L-BFGS with capped iterations.

Source: {SOURCES["luo"]}.
""",
    )


def probe_settings(result: ExtractionResult) -> ProbeSettings:
    """The probe's controls, as settings (which refuse a bad combination with an IsoscopeError)."""
    c1, c2, c3, c4, c5 = st.columns(5)
    max_pos = c1.number_input(
        "Max position",
        1,
        8192,
        int(min(MAX_POSITION.default, result.settings.max_length)),
        key="pos_probe_maxpos",
        help="Tokens at this position or later are left out.",
    )
    test_fraction = interval_slider(c2, "Held-out texts", TEST_FRACTION, "pos_probe_test")
    seed = interval_number(c3, "Seed", SEED, "pos_probe_seed", help=None)
    iters = choice_slider(c4, "L-BFGS iterations", PROBE_ITER, "pos_probe_iter")
    exclude_special = c5.checkbox("Exclude special tokens", True, key="pos_probe_special")
    return ProbeSettings(
        max_position=int(max_pos),
        test_fraction=float(test_fraction),
        seed=int(seed),
        max_iter=int(iters),
        exclude_special=bool(exclude_special),
    )


def probe_accuracy_view(probe: ProbeResult) -> None:
    st.caption(
        f"{probe.n_train:,} training tokens from {probe.n_train_texts} texts · {probe.n_test:,} held-out tokens "
        f"from {probe.n_test_texts} texts · {len(probe.classes)} positions"
    )
    fig_acc = plots.probe_accuracy_line(
        probe.state_names, probe.accuracy, probe.train_accuracy, probe.chance
    )
    acc_frame = pd.DataFrame(
        {
            "state": probe.state_names,
            "held_out_accuracy": probe.accuracy,
            "train_accuracy": probe.train_accuracy,
            "baseline": probe.chance,
        }
    )
    chart_with_downloads(
        fig_acc,
        key="pos_probe_acc_chart",
        downloads="pos_probe_acc",
        frame=acc_frame,
        json_data=probe.to_dict(),
        name="position_probe",
    )


def probe_contribution_view(result: ExtractionResult, probe: ProbeResult) -> None:
    """One state's neuron contributions (its outlier dims red), and all states' as a heatmap."""
    state_name = st.selectbox(
        "Hidden state for neuron contributions",
        probe.state_names,
        index=0,
        key="pos_probe_state",
    )
    s = probe.state_names.index(state_name)
    found = outliers_by_name(result)
    fig_c = plots.contribution_bars(
        probe.contributions[s], found[state_name], state_name=state_name
    )
    st.plotly_chart(fig_c, width="stretch", key="pos_probe_contrib_chart")
    table = contribution_table(probe, s, found[state_name])
    st.dataframe(table, hide_index=True, width="stretch")
    download_buttons(
        "pos_probe_contrib",
        fig=fig_c,
        frame=table,
        name=f"probe_contributions_{state_name}",
    )
    st.plotly_chart(
        plots.contribution_heatmap(probe.state_names, probe.contributions),
        width="stretch",
        key="pos_probe_heat_chart",
    )
