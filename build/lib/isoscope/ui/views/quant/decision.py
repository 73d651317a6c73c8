"""The Quantization readiness page's decision and recipe: the llm-compressor recipe of the report,
with its predicted end metric, under the ignore-list share the user chooses."""

from __future__ import annotations

import streamlit as st

from isoscope.analysis.quant.params import IGNORE_SHARE
from isoscope.analysis.quant.readiness import QuantReport
from isoscope.analysis.quant.recipe import Recipe, build_recipe, predict
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import LoadedModel, private_copy
from isoscope.ui.frame.literal import message
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.views.quant.shared import RECIPE_ANCHOR
from isoscope.ui.widgets.controls import interval_slider
from isoscope.ui.work.cached import heavy


@heavy("Predicting the recipe's end metric:", "passes")
def recipe_prediction(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, keep: int, alpha: float,
    ignore_share: float, _report: QuantReport, *, progress,
) -> Recipe:  # fmt: skip
    """The llm-compressor recipe of this report and its predicted end metric (two passes of the
    end texts), on a private copy."""
    copy = private_copy(loaded)
    return predict(copy, _report, build_recipe(copy, _report, ignore_share=ignore_share))


def recipe_section(
    loaded: LoadedModel, corpus: Corpus, report: QuantReport, n_texts: int, max_length: int
) -> None:
    """The decision (scheme, modules kept, α, rotation) with its numbers, and the llm-compressor
    recipe that carries it out (``isoscope quant --recipe`` writes the same file)."""
    if report.end is None:
        return
    st.subheader("Decision and recipe", anchor=RECIPE_ANCHOR)
    share = interval_slider(
        st,
        "Recipe: keep the most sensitive blocks in full precision until they make up this share "
        "of the summed per-block loss",
        IGNORE_SHARE,
        "quant_ignore_share",
    )
    try:
        recipe = recipe_prediction(
            loaded, corpus, n_texts, max_length, report.keep, report.alpha, float(share), report
        )
    except IsoscopeError as exc:
        st.error(f"**No recipe for this model.** {message(exc)}")
        return
    st.markdown(f"**{recipe.decision()}** The recipe below carries it out.")
    for note in recipe.notes:
        st.caption(f"ℹ️ {message(note)}")
    cols = st.columns(3)
    cols[0].download_button(
        "llm-compressor recipe (YAML)",
        data=recipe.yaml(),
        file_name="recipe.yaml",
        mime="application/x-yaml",
        key="dl_yaml_quant_recipe",
        on_click="ignore",
        icon=":material/download:",
    )
    download_buttons("quant_recipe", json_data=recipe.to_dict(), name="quant_recipe")
    st.caption(
        'Run it with llm-compressor: `oneshot(model=..., dataset=..., recipe="recipe.yaml")` '
        '(pip install "isoscope[quant]"). The JSON holds the same decisions for other toolchains.'
    )
