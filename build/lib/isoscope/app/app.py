"""isoscope: the Streamlit frame. Navigation over pages/ and the shared sidebar; pages stay thin."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from isoscope.analysis import ANALYSES
from isoscope.ui.frame.failure import PAGE_KEY, show_failure
from isoscope.ui.frame.selection import note_page_visit
from isoscope.ui.frame.sidebar import sidebar
from isoscope.ui.server.access import hide_error_details, passphrase_gate
from isoscope.ui.server.warmup import start_umap_warmup
from isoscope.ui.sharing.links import apply_link, former_pages, show_link_notice, sync_link

HERE = Path(__file__).resolve().parent
# The browser tab's icon, served by this server (a ":material/...:" icon would make every visitor's
# browser fetch it from Google's font CDN).
PAGE_ICON = str(HERE / "assets" / "icon.png")


st.set_page_config(page_title="isoscope", page_icon=PAGE_ICON, layout="wide")
hide_error_details()  # a shared server's visitors never see a traceback, even Streamlit's own
passphrase_gate()  # a shared server with a passphrase asks for it once per session
# one page per declared analysis (isoscope.analysis.ANALYSES), in the order declared
pages = [
    st.Page(HERE / "pages" / a.page, title=a.title, icon=a.icon, default=(i == 0))
    for i, a in enumerate(ANALYSES)
    if (HERE / "pages" / a.page).exists()
]
navigation = st.navigation([*pages, *former_pages(HERE / "pages")])  # former paths: hidden
title = getattr(navigation, "title", "current")  # bare mode (no server): a page with no title
st.session_state[PAGE_KEY] = title
with st.sidebar:
    st.markdown("## isoscope")
    st.caption("Embedding geometry of Transformer models")
try:  # the link, the sidebar and the page: an error is one message, never a trace
    apply_link(pages, navigation)  # a shared link's model, corpus, page and controls (once)
    show_link_notice()
    sidebar()
    sync_link(navigation)  # the URL always reopens this view
    note_page_visit(navigation.url_path or "overview")
    navigation.run()
except Exception as exc:  # IsoscopeError: its message; anything else: a bug, details folded away
    show_failure(exc, title)
# numba compiles UMAP in a low-priority background thread; started once the first page
# has rendered, so it never delays it (the projections page starts it itself if opened first).
start_umap_warmup()
sync_link(navigation)
