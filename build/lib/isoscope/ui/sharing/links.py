"""Links that reopen a view: the model source, corpus choice, page, hidden state and each page's
main controls live in the URL (``st.query_params``).

- :func:`apply_link` runs once per browser session, before the sidebar and the page: it reads the
  URL, validates every value, and seeds the selection (model, corpus) and the widgets' session state
  with the valid ones. An invalid or unknown value opens the defaults for it, and the page shows one
  line saying which (:func:`show_link_notice`).
- :func:`sync_link` runs on every rerun and writes the current view back, so the address bar is
  always a link to what is on screen ("share" = copy the URL).
- Pages with a hidden-state control take their initial state from :func:`state_index`; lazy tab
  groups open the link's tab (:func:`check_tab` drops an unknown label); the Compare page's Model B
  travels as ``model_b`` (a preset's source, or the typed source).
- A renamed page's former path (:data:`PAGE_ALIASES`) still opens it, from the URL path or ``page=``.

Never in a link: the pickle opt-in, the device and dtype (they stay the server's defaults), and an
uploaded file (its bytes cannot travel in a URL; such links open the bundled corpus). Pasted text
travels when it is at most :data:`MAX_PASTED_CHARS` characters. Images and audio travel as
``corpus=images`` / ``corpus=audio`` (the bundled demo set) plus ``folder=PATH`` where the server
reads folders of its own (never in shared mode, :mod:`isoscope.ui.server.access`; a folder link opened there
names the folder as invalid and opens the demo set).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from isoscope.ui.frame.literal import literal, quoted
from isoscope.ui.frame.selection import Selection, get_selection
from isoscope.ui.frame.session import SELECTION_KEY
from isoscope.ui.work.media import MEDIA_KINDS

if TYPE_CHECKING:
    from isoscope.ui.widgets.ranges import Interval, Options, Tab

APPLIED_KEY = "links_applied"
NOTICE_KEY = "links_notice"
STATE_KEY = "links_state"  # the link's hidden state, until a page with a state control uses it
TABS_KEY = "links_tabs"  # tab groups the link chose a tab for, until their page checks it
MAX_PASTED_CHARS = 2000
MEDIA_LINK_KINDS = tuple(MEDIA_KINDS)  # the sidebar's corpus kinds for folders of files
CORPUS_KINDS = ("bundled", "paste", *MEDIA_LINK_KINDS)  # the corpus choices a link may name


def _controls(page: str) -> dict[str, Options | Interval | Tab]:
    """A page's (its URL path) main controls: widget keys and what each accepts, as the page's
    widgets declare them (ui/widgets/ranges.py). The Overview has none; it does not import every page's
    option lists (sklearn and more), so that the first page stays fast."""
    if page == "overview":
        return {}
    from isoscope.ui.widgets.ranges import LINK_CONTROLS

    return LINK_CONTROLS.get(page, {})


# Pages whose hidden-state widget sits under this key: an index (0 = emb) in a selectbox, or the
# state's name ("emb", "1" ...) in a select_slider.
STATE_WIDGETS = {
    "projections": "proj_state",
    "outliers": "out_state",
    "anisotropy": "aniso_layer",
    "dimension": "dim_state",
}


def known_model(source: str) -> bool:
    """Sources a link may name: the presets, random models, checkpoint folders and ``.gguf``
    files that exist on this server (as the sidebar accepts them) and Hub ids: in its local
    Hugging Face cache, or, unless the server is offline, to download as a typed id is (under
    a shared server's allow-list and quota, :func:`isoscope.ui.work.models.get_model`; a link never opts in
    to pickle weights)."""
    from isoscope.engine.errors import IsoscopeError
    from isoscope.engine.load import hub
    from isoscope.engine.load.models import local_hub_snapshot
    from isoscope.engine.load.source import parse_source
    from isoscope.ui.server import access

    try:
        access.policy().check_model_source(source)  # a shared server's rules hold for links too
        parsed = parse_source(source)
    except IsoscopeError:
        return False
    if parsed.base is not None:
        return known_model(parsed.base.text)
    if parsed.kind in ("preset", "random"):
        return True
    if parsed.kind == "gguf":
        return parsed.path is not None and parsed.path.is_file()
    if parsed.kind == "hub":
        return not hub.offline() or local_hub_snapshot(parsed.text) is not None
    return (
        parsed.path is not None and parsed.path.is_dir() and (parsed.path / "config.json").exists()
    )


def _page_paths(pages: Sequence[Any]) -> dict[str, Any]:
    return {page.url_path or "overview": page for page in pages}


# A page's former path, which links already shared still name (as their URL path and as
# ``page=``), mapped to the page's path now. The old path stays in the navigation as a hidden page
# (:func:`former_pages`), so Streamlit opens it without a "page not found" dialog, and
# :func:`apply_link` moves on to the page's own path with the link's controls.
PAGE_ALIASES = {"decoder": "massive"}


def former_pages(folder: Path) -> list[Any]:
    """A hidden ``st.Page`` at each former path of :data:`PAGE_ALIASES`, running the file of the
    page it names (``folder/<path>.py``)."""
    return [
        st.Page(folder / f"{new}.py", url_path=old, visibility="hidden")
        for old, new in PAGE_ALIASES.items()
        if (folder / f"{new}.py").exists()
    ]


def apply_link(pages: Sequence[Any], current: Any) -> None:
    """Seed the session from the URL once per session; switch to the link's page if it names one.

    ``pages``: the ``st.Page`` objects of the navigation (not the hidden :func:`former_pages`);
    ``current``: the page being run. A former path always switches to the page it names.
    """
    if get_script_run_ctx() is None:  # bare mode (app.py imported, not served): no URL to read
        return
    paths = _page_paths(pages)
    renamed = paths.get(PAGE_ALIASES.get(current.url_path or "overview", ""))
    params = {k: st.query_params.get(k) for k in st.query_params}
    if st.session_state.get(APPLIED_KEY) or not params:
        st.session_state[APPLIED_KEY] = True
        if renamed is not None:
            st.switch_page(renamed)
        return
    st.session_state[APPLIED_KEY] = True
    bad: list[str] = []
    selection = get_selection()
    model = params.get("model")
    if model is not None:
        if known_model(model.strip()):
            selection = replace(selection, model_source=model.strip())
        else:
            bad.append(f"model {quoted(model)}")
    corpus = params.get("corpus")
    if corpus is not None:
        text = params.get("texts", "")
        if corpus == "bundled":
            selection = replace(selection, corpus_kind="bundled", corpus_text="")
        elif corpus == "paste" and text.strip() and len(text) <= MAX_PASTED_CHARS:
            selection = replace(selection, corpus_kind="paste", corpus_text=text)
        elif corpus in MEDIA_LINK_KINDS:
            folder = _media_folder(corpus, params.get("folder", "").strip(), bad)
            selection = replace(selection, corpus_kind=corpus, corpus_text=folder)
        else:
            bad.append(
                f"corpus {quoted(corpus)}"
                + (" (uploads are not part of links)" if corpus == "upload" else "")
            )
    if selection != get_selection():
        st.session_state[SELECTION_KEY] = selection
    page = params.get("page")
    target = renamed or current
    if page is not None:
        page = PAGE_ALIASES.get(page, page)
        if page in paths:
            target = paths[page]
        else:
            bad.append(f"page {quoted(page)}")
    target_path = target.url_path or "overview"
    from isoscope.ui.widgets.ranges import Tab

    for key, spec in _controls(target_path).items():
        if key in params:
            try:
                st.session_state[key] = spec.parse(params[key])
            except (TypeError, ValueError):
                bad.append(f"{key} {quoted(params[key])}")
            else:
                if isinstance(spec, Tab):
                    st.session_state.setdefault(TABS_KEY, set()).add(key)
    if target_path == "compare" and "model_b" in params:
        _apply_model_b(params["model_b"].strip(), selection.model_source, bad)
    if "state" in params:
        st.session_state[STATE_KEY] = params["state"]
    if bad:
        st.session_state[NOTICE_KEY] = (
            f"This link has an invalid or unknown {', '.join(bad)}; opened the defaults for "
            f"{'it' if len(bad) == 1 else 'them'}."
        )
    if target_path != (current.url_path or "overview"):
        st.switch_page(target)


def _media_folder(kind: str, folder: str, bad: list[str]) -> str:
    """A link's image / audio folder: "" (the demo set) unless the server reads folders of its own
    and this one exists; a refused folder is named in the one-line notice."""
    from isoscope.ui.server import access

    if not folder:
        return ""
    if not access.policy().server_paths:
        bad.append(
            f"folder {quoted(folder)} (this shared server opens only its bundled demo {kind})"
        )
        return ""
    if not Path(folder).expanduser().is_dir():
        bad.append(f"folder {quoted(folder)}")
        return ""
    return folder


def _apply_model_b(source: str, model_a: str, bad: list[str]) -> None:
    """Seed the Compare page's Model B: its preset when there is one, else the typed source."""
    from isoscope.ui.frame.sidebar import CUSTOM, model_b_options
    from isoscope.ui.widgets.ranges import MODES

    if not known_model(source):
        bad.append(f"model B {quoted(source)}")
        return
    options = model_b_options(model_a)
    label = next((k for k, v in options.items() if v == source), None)
    if label is None:
        label = next(k for k, v in options.items() if v == CUSTOM)
        st.session_state["cmp_model_b_custom"] = source
    st.session_state["cmp_model_b"] = label
    st.session_state.setdefault("cmp_mode", MODES[0])


def _model_b(model_a: str) -> str | None:
    """The Compare page's current Model B source (None: not chosen yet, or comparing corpora)."""
    from isoscope.ui.frame.sidebar import CUSTOM, model_b_options
    from isoscope.ui.widgets.ranges import MODES

    if st.session_state.get("cmp_mode", MODES[0]) != MODES[0]:
        return None
    source = model_b_options(model_a).get(st.session_state.get("cmp_model_b", ""))
    if source == CUSTOM:
        source = str(st.session_state.get("cmp_model_b_custom", "")).strip()
    return source or None


def check_tab(key: str, labels: Sequence[str]) -> None:
    """Drop a link's unknown tab label for the tab group ``key`` (the one-line notice says so)."""
    from_link = key in st.session_state.get(TABS_KEY, ())
    if from_link:
        st.session_state[TABS_KEY].discard(key)
    value = st.session_state.get(key)
    if value is not None and value not in labels:
        del st.session_state[key]
        if from_link:
            st.session_state[NOTICE_KEY] = (
                f"This link has an unknown tab {quoted(value)}; opened the first tab "
                f"({quoted(labels[0])})."
            )
            show_link_notice()


def state_index(
    names: Sequence[str], default: int, widget_key: str, *, by_name: bool = False
) -> int:
    """The hidden-state index a page's state control starts at: the link's ``state`` when it is
    valid for this model (``emb`` or ``0`` .. ``L``), else ``default`` (with the one-line notice).
    ``by_name``: the widget holds the state's name (a select_slider over ``names``), not its index."""
    from isoscope.engine.naming import parse_hidden_state

    wanted = st.session_state.pop(STATE_KEY, None)
    if wanted is None:
        if widget_key not in st.session_state:
            return default
        value = st.session_state[widget_key]
        return names.index(value) if by_name and value in names else int(value)
    try:
        index = parse_hidden_state(wanted, len(names) - 1)
    except ValueError:
        st.session_state[NOTICE_KEY] = (
            f"This link has an invalid or unknown hidden state {quoted(wanted)} for this model "
            f"(states: {literal(names[0])}, 1 … {literal(names[-1])}); opened the default state."
        )
        show_link_notice()
        return default
    st.session_state[widget_key] = names[index] if by_name else index
    return index


def show_link_notice() -> None:
    """The one-line notice about an invalid link value (shown once)."""
    notice = st.session_state.pop(NOTICE_KEY, None)
    if notice:
        st.warning(notice, icon=":material/link_off:")


def link_params(page_path: str, selection: Selection) -> dict[str, str]:
    """The query parameters that reopen the current view."""
    params = {"page": page_path, "model": selection.model_source}
    if selection.corpus_kind == "paste" and len(selection.corpus_text) <= MAX_PASTED_CHARS:
        params["corpus"] = "paste"
        params["texts"] = selection.corpus_text
    elif selection.corpus_kind in MEDIA_LINK_KINDS:
        from isoscope.ui.server import access

        params["corpus"] = selection.corpus_kind
        if selection.corpus_text and access.policy().server_paths:
            params["folder"] = selection.corpus_text
    else:
        params["corpus"] = "bundled" if selection.corpus_kind != "upload" else "upload"
    for key in _controls(page_path):
        if key in st.session_state:
            params[key] = str(st.session_state[key])
    if page_path == "compare" and (model_b := _model_b(selection.model_source)):
        params["model_b"] = model_b
    widget = STATE_WIDGETS.get(page_path)
    if STATE_KEY in st.session_state:  # the link's state, not yet used by the page
        params["state"] = str(st.session_state[STATE_KEY])
    elif widget is not None and widget in st.session_state:
        from isoscope.engine.naming import hidden_state_label

        value = st.session_state[widget]
        params["state"] = value if isinstance(value, str) else hidden_state_label(int(value))
    return params


def dimension_links(state: int, dims: Sequence[int], limit: int = 8) -> str:
    """Markdown links that open the dimension card of each of ``dims`` at hidden state ``state``
    with the current model and corpus (in a new tab, whose session applies the link), or ""."""
    from urllib.parse import urlencode

    from isoscope.engine.naming import hidden_state_label

    params = link_params("dimension", get_selection())
    label = hidden_state_label(int(state))
    links = [
        f"[{int(d)}](dimension?{urlencode(params | {'state': label, 'dim_dim': str(int(d))})})"
        for d in list(dims)[:limit]
    ]
    return f"Open the card of dim {', '.join(links)} at state {label}" if links else ""


def sync_link(current: Any) -> None:
    """Write the current view into the URL (only what changed, so no needless browser updates)."""
    params = link_params(current.url_path or "overview", get_selection())
    if params.get("corpus") == "upload":
        params.pop("corpus")
    existing = {k: st.query_params.get(k) for k in st.query_params}
    if existing != params:
        st.query_params.from_dict(params)
