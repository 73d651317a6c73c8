"""Images and audio in the UI: the sidebar's folder inputs, the cached media corpora, and the one
line a text-only view shows instead of itself (:mod:`isoscope.engine.inputs.media`)."""

from __future__ import annotations

import streamlit as st

from isoscope.engine.errors import InputError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.inputs.media import (
    KIND_NOUNS,
    MediaCorpus,
    demo_images,
    demo_speech,
    load_media_folder,
    media_files,
)
from isoscope.ui.server import access

MEDIA_KINDS = {"images": "image", "audio": "audio"}  # sidebar corpus kind -> input kind
MEDIA_NOUN = KIND_NOUNS  # input kind -> what a line calls them


def folder_input(kind: str, current_path: str) -> str:
    """The folder of an image / audio corpus ("" = the bundled demo set); a path on this machine
    only where the server allows them (not in shared mode)."""
    demo = (
        "scikit-learn's sample photos, 4 tiles each"
        if kind == "images"
        else ("sample sentences read by espeak-ng")
    )
    if not access.policy().server_paths:
        st.caption(f"Bundled demo set: {demo}. Folders on the server are not offered here.")
        return ""
    return st.text_input(
        "Folder on this machine (empty: the bundled demo set)",
        value=current_path,
        key=f"sb_{kind}_folder",
        placeholder=f"/path/to/{kind}",
        help=f"Empty: {demo}. A folder's sub-folders are the classes.",
    ).strip()


def _stamp(kind: str, path: str) -> tuple:
    """Cheap identity of a folder's files (names, sizes, times): a changed file reloads it."""
    files = media_files(path, kind)
    return tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)


@st.cache_resource(max_entries=2, show_spinner="Reading the files…")
def _cached_folder(kind: str, path: str, stamp: tuple) -> MediaCorpus:
    return load_media_folder(path, kind)


@st.cache_resource(max_entries=2, show_spinner="Preparing the demo set…")
def _cached_demo(kind: str) -> MediaCorpus:
    return demo_images() if kind == "image" else demo_speech()


def media_corpus(corpus_kind: str, path: str) -> MediaCorpus:
    """The selected image / audio corpus; a folder path is refused on a shared server."""
    kind = MEDIA_KINDS[corpus_kind]
    if not path:
        return _cached_demo(kind)
    if not access.policy().server_paths:
        raise InputError("this shared server reads no folders of its own; use the bundled demo set")
    return _cached_folder(kind, path, _stamp(kind, path))


def applies_to_text(
    result: ExtractionResult, what: str, why: str = "reads sentences and their words"
) -> bool:
    """True for a text analysis; else one line saying why the view ``what`` does not apply."""
    kind = result.input_kind
    if kind != "text":
        st.info(
            f"{what} does not apply here: it {why}, and this analysis read "
            f"{MEDIA_NOUN[kind]}. Pick a text corpus and a text model "
            "in the sidebar.",
            icon=":material/block:",
        )
        return False
    return True


def text_only(
    result: ExtractionResult, what: str, why: str = "reads sentences and their words"
) -> None:
    """Stop a view that needs text when the analysis read images or audio, in one line."""
    if not applies_to_text(result, what, why):
        st.stop()


def thumbnail_caption(result: ExtractionResult, counts: tuple[int, int] | None) -> None:
    """Under a per-token scatter of an image analysis: how many of its patch points show their
    thumbnail on hover (``counts``: shown, patch points; None: the images are not at hand), and
    the payload cap when it applies."""
    from isoscope.plots.projections import THUMBNAIL_BYTES, THUMBNAIL_POINTS

    if result.input_kind != "image":
        return
    if counts is None:
        st.caption("Patch thumbnails on hover need the analysis's images in the sidebar's folder.")
        return
    shown, patches = counts
    text = f"Hover a patch point to see its patch ({shown:,} of {patches:,} patch points have a thumbnail"
    if shown < patches:
        text += (
            f"; the payload cap of {THUMBNAIL_POINTS:,} thumbnails or {THUMBNAIL_BYTES / 2**20:.0f} MiB "
            "applies: lower the number of points to see one on every patch"
        )
    st.caption(text + ").")
