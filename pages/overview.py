"""Overview: model card, corpus summary, outlier dims per layer, anisotropy by layer."""

from __future__ import annotations

import streamlit as st

from backend.engine.extraction import ExtractionResult
from backend.engine.models import LoadedModel
from backend.plots.overview import anisotropy_line, model_card_rows
from ui.cached import anisotropy, outlier_dims_by_state
from ui.common import explainer, load_or_stop, show_notices
from ui.decoder import first_position_section
from ui.share import findings_panel

st.title("Overview")
loaded: LoadedModel
result: ExtractionResult
loaded, result = load_or_stop()
finish_findings = findings_panel(loaded, result)

left, right = st.columns([1, 1])
with left:
    st.subheader("Model")
    st.table(model_card_rows(result.model))
with right:
    st.subheader("Corpus")
    st.metric("Texts", f"{result.num_texts:,}")
    st.metric("Tokens analysed", f"{result.num_tokens:,}")
    st.caption(
        f"{result.corpus_name} · max {result.settings.max_length} tokens per text · "
        f"special tokens {'excluded' if result.settings.exclude_special else 'included'} · "
        f"token sample {len(result.sample_index):,} of {result.num_tokens:,} · extraction {result.seconds:.1f} s"
    )
    show_notices(result)

aniso = anisotropy(result)
outliers = outlier_dims_by_state(result)
st.subheader("Outlier dimensions per hidden state")
rows = [
    {
        "hidden state": name,
        "outlier dims (z-score or extreme-index)": ", ".join(map(str, outliers[s])) or "—",
        "anisotropy": round(float(aniso[s]), 3),
    }
    for s, name in enumerate(result.state_names)
]
st.dataframe(rows, hide_index=True, width="stretch")
st.plotly_chart(anisotropy_line(result.state_names, aniso), width="stretch", key="overview_aniso")
explainer(
    "What is this / references",
    """
**Hidden states** are numbered `emb` (the embedding output, index 0) and `1 … L` (the output of each layer).

**Outlier dimensions** are flagged when their mean lies more than 3 standard deviations from the mean of
all dimensions' means (Timkey & van Schijndel 2021, *All Bark and No Bite*, arXiv 2109.04404) or when they
hold the minimum or maximum of at least half of all token vectors (Luo, Kulmizev & Mao 2021, *Positional
Artefacts Propagate Through Masked Language Model Embeddings*, arXiv 2011.04393). The *Outlier dimensions*
page shows all four criteria with their thresholds.

**Anisotropy** is the mean cosine similarity of 10,000 random pairs of token vectors from different texts
(Ethayarajh 2019, arXiv 1909.00512): 0 for directions spread evenly, near 1 when all vectors point one way.
""",
)

first_position_section(result)
finish_findings()  # the remaining findings, with the rest of the page already shown
