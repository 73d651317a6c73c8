"""isoscope: the Streamlit frame. Navigation over pages/ and the shared sidebar; pages stay thin."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from isoscope.engine.errors import IsoscopeError
from isoscope.engine.store.saved import ModelUnavailableError
from isoscope.ui.frame.failure import show_unexpected
from isoscope.ui.frame.selection import note_page_visit
from isoscope.ui.frame.sidebar import sidebar
from isoscope.ui.server.access import passphrase_gate
from isoscope.ui.server.warmup import start_umap_warmup
from isoscope.ui.sharing.links import apply_link, former_pages, show_link_notice, sync_link

HERE = Path(__file__).resolve().parent

# (file in pages/, title, icon). A page that is not there yet is simply not listed.
PAGES = [
    ("overview.py", "Overview", ":material/dashboard:"),
    ("outliers.py", "Outlier dimensions", ":material/grid_on:"),
    ("anisotropy.py", "Anisotropy", ":material/scatter_plot:"),
    ("projections.py", "Clipping & projections", ":material/bubble_chart:"),
    ("similarity.py", "Sentence similarity", ":material/compare_arrows:"),
    ("layernorm.py", "LayerNorm", ":material/tune:"),
    ("positional.py", "Positional information", ":material/timeline:"),
    ("massive.py", "Massive activations & sinks", ":material/bolt:"),
    ("quant.py", "Quantization readiness", ":material/compress:"),
    ("compare.py", "Compare", ":material/difference:"),
    ("tour.py", "Guided tour", ":material/school:"),
]

st.set_page_config(page_title="isoscope", page_icon=":material/blur_on:", layout="wide")
passphrase_gate()  # a shared server with a passphrase asks for it once per session
pages = [
    st.Page(HERE / "pages" / file, title=title, icon=icon, default=(i == 0))
    for i, (file, title, icon) in enumerate(PAGES)
    if (HERE / "pages" / file).exists()
]
navigation = st.navigation([*pages, *former_pages(HERE / "pages")])  # former paths: hidden
with st.sidebar:
    st.markdown("## isoscope")
    st.caption("Embedding geometry of Transformer models")
apply_link(pages, navigation)  # a shared link's model, corpus, page and controls (once per session)
show_link_notice()
sidebar()
sync_link(navigation)  # the URL always reopens this view
note_page_visit(navigation.url_path or "overview")
try:
    navigation.run()
except ModelUnavailableError as exc:  # a saved analysis is open and this view needs the model
    st.info(f"**This view needs the model.** {exc}", icon=":material/memory:")
except IsoscopeError as exc:  # anything a view did not handle itself: a message, never a trace
    st.error(f"**This view cannot be shown.** {exc}")
except Exception as exc:  # a bug: one line and how to report it, the details folded away
    show_unexpected(exc, navigation.title)
# numba compiles UMAP (~1 min) in a low-priority background thread; started once the first page
# has rendered, so it never delays it (the projections page starts it itself if opened first).
start_umap_warmup()
sync_link(navigation)
