"""Every token of one hidden state, before and after post-processing, in the browser.

The heavy part (:func:`corpus_points`: a second pass spilling the state to disk, the streaming
PCA or landmark UMAP / t-SNE, the colourings, :func:`isoscope.plots.atlas.encode_points`) runs once
per choice for every session, in the server's fair queue with shared progress, and can be
cancelled by leaving. The points then reach the browser without Streamlit's websocket:
:class:`PointStore` writes them to ``data/<token>.bin`` inside the atlas component's folder,
where Streamlit's component route serves them to the frame (``ui/widgets/frontend/atlas.html``), which
fetches and draws them with WebGL. The token is 32 random url-safe characters per published
view, known only to the session it was given to; a session's previous file is deleted when it
publishes a new one, and only the newest :data:`KEEP_FILES` files are kept at all. The URL holds
the token, never a server path; Streamlit's route refuses paths that leave the folder.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import tempfile
import threading
from pathlib import Path

import streamlit as st
import streamlit.components.v1 as components

from isoscope.analysis.projections.all_tokens import LANDMARKS, corpus_before_after
from isoscope.analysis.projections.methods import METHODS, text_snippets, token_colouring
from isoscope.engine.environment import default_cache_dir
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.extraction.spill import SpilledState, spill_state
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.store.cache import ResultCache, touch
from isoscope.plots.atlas import encode_points
from isoscope.ui.frame.literal import message
from isoscope.ui.frame.page import explainer
from isoscope.ui.widgets.controls import PostChoice
from isoscope.ui.work.cached import heavy
from isoscope.ui.work.extraction import result_key
from isoscope.ui.work.queue import session_id

NAME = "atlas"
PAGE = Path(__file__).resolve().parent / "frontend" / "atlas.html"
DATA = "data"
KEEP_FILES = 8  # published point files kept on the server (33 MB each at a million tokens)
HEIGHT = 520


class PointStore:
    """Point files of sessions under ``folder`` (module doc); thread-safe."""

    def __init__(self, folder: Path, keep: int = KEEP_FILES):
        self.folder = Path(folder)
        self.keep = keep
        self._lock = threading.Lock()
        self._by_session: dict[str, str] = {}
        self._order: list[str] = []  # published tokens, oldest first

    def publish(self, session: str, payload: bytes) -> str:
        """Write ``payload`` for ``session``; returns its URL relative to the component page."""
        token = secrets.token_urlsafe(24)
        self.folder.mkdir(parents=True, exist_ok=True)
        staging = self.folder / f".{token}.tmp"
        staging.write_bytes(payload)
        os.replace(staging, self.folder / f"{token}.bin")
        with self._lock:
            old = self._by_session.get(session)
            self._by_session[session] = token
            self._order.append(token)
            gone = [old] if old in self._order else []
            gone += [t for t in self._order if t not in gone][
                : max(0, len(self._order) - len(gone) - self.keep)
            ]
            for dropped in gone:
                self._order.remove(dropped)
                (self.folder / f"{dropped}.bin").unlink(missing_ok=True)
            self._by_session = {s: t for s, t in self._by_session.items() if t in self._order}
        return f"{DATA}/{token}.bin"


_folder: Path | None = None
_store: PointStore | None = None
_store_lock = threading.Lock()


def component_dir() -> Path:
    """The atlas component's folder (``index.html``, ``data/``), one per page version, under the
    isoscope cache (or the temp folder when the cache is not writable)."""
    global _folder
    if _folder is not None and (_folder / "index.html").is_file():
        return _folder
    tag = hashlib.sha256(PAGE.read_bytes()).hexdigest()[:12]
    roots = (
        default_cache_dir() / "web",
        Path(tempfile.gettempdir()) / f"isoscope-web-{os.getuid()}",
    )
    for root in roots:
        target = root / f"{NAME}-{tag}"
        try:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(PAGE, target / "index.html")
        except OSError:
            continue
        _folder = target
        return target
    raise OSError(f"cannot write the atlas component to {roots[0]} or {roots[1]}")


def point_store() -> PointStore:
    global _store
    with _store_lock:
        if _store is None:
            _store = PointStore(component_dir() / DATA)
        return _store


def spill_path(result: ExtractionResult, state: int) -> Path:
    """Where ``state`` of ``result`` is spilled: in the isoscope cache, under its size limit and
    least-recently-used eviction with the cached analyses (:mod:`isoscope.engine.store.cache`)."""
    return ResultCache().spill_path(f"{result_key(result)[:32]}-state{state}")


@heavy("Projecting every token", "steps")
def corpus_points(
    loaded: LoadedModel,
    result: ExtractionResult,
    state: int,
    method: str,
    post: PostChoice,
    seed: int,
    landmarks: int = LANDMARKS,
    *,
    progress,
) -> bytes:
    """The encoded points (backend/plots/atlas.py) of every token of ``state``, raw and
    post-processed: a second pass over the corpus (kept on disk for the next choice), then the
    projections. Progress counts texts of the pass, then rows of the projection."""
    texts, rows = result.num_texts, result.num_tokens
    path = spill_path(result, state)
    d = result.hidden_size
    if path.is_file() and path.stat().st_size == rows * d * 4:
        touch(path)  # a use: evicted last
        spilled = SpilledState(path, rows, d, state)
    else:
        spilled = spill_state(
            loaded, result, state, path, progress=lambda done, total: progress(done, 2 * texts)
        )
    try:
        before, after = corpus_before_after(
            spilled,
            result.sample_vectors[state],
            method,
            post.name,
            post.options,
            seed,
            landmarks=landmarks,
            progress=lambda done, total: progress(texts + done * texts // max(total, 1), 2 * texts),
        )
    except FileNotFoundError as exc:  # evicted by another session's save meanwhile
        raise InputError(
            "the spilled state was removed from the cache while it was read (the cache limit is "
            "full); press the button again, or raise the cache limit"
        ) from exc
    finally:
        ResultCache().enforce_limit(keep=path)  # after the read: a spill over the limit goes now
    tokens = result.tokens
    colourings = {by: token_colouring(tokens, tokens, by) for by in COLOURS}
    name = result.state_names[state]
    titles = (f"raw · state {name}", f"{post.label} · state {name}")
    return encode_points(
        before, after, colourings, tokens, text_snippets(result.texts, 100), titles
    )


COLOURS = ("category", "position", "token", "text", "frequency")


def atlas_chart(payload: bytes, *, key: str, height: int = HEIGHT) -> None:
    """Publish ``payload`` for this session (once per payload) and draw it in the atlas frame."""
    digest = hashlib.sha256(payload).hexdigest()
    published = st.session_state.get(f"{key}_published")
    if not published or published[0] != digest:
        published = (digest, point_store().publish(session_id() or "script", payload))
        st.session_state[f"{key}_published"] = published
    component = components.declare_component(NAME, path=str(component_dir()))
    component(url=published[1], height=height, key=key, default=None)


FRAME_SELECTOR = f'iframe[title="isoscope.ui.widgets.atlas.{NAME}"]'


def every_token_view(
    loaded: LoadedModel,
    result: ExtractionResult,
    state: int,
    method: str,
    post: PostChoice,
    seed: int,
) -> None:
    """The Clipping & projections page's "all tokens" points: a button starts the work (a second
    pass plus the projections, minutes at a million tokens), then the atlas draws every token."""
    landmarks = landmark_control(result.num_tokens, method)
    every_token_caption(result, state, method, landmarks)
    every_token_explainer(result.hidden_size)
    every_token_run(loaded, result, state, method, post, seed, landmarks)


def landmark_control(n: int, method: str) -> int:
    """How many tokens UMAP / t-SNE is fitted on (PCA needs none)."""
    landmarks = LANDMARKS
    if method != "pca":
        landmarks = int(
            st.number_input(
                "Landmarks",
                1000,
                max(1000, min(n, 50_000)),
                min(LANDMARKS, max(1000, n)),
                step=1000,
                key="proj_landmarks",
                help="UMAP / t-SNE is fitted on this many tokens (a seeded sample); every other "
                "token is placed at the weighted mean of its 15 nearest landmarks.",
            )
        )
    return landmarks


def every_token_caption(result: ExtractionResult, state: int, method: str, landmarks: int) -> None:
    name, n, d = result.state_names[state], result.num_tokens, result.hidden_size
    how = (
        "exact streaming PCA"
        if method == "pca"
        else f"landmark {METHODS[method]} ({min(landmarks, n):,} fitted) + kNN placement of the "
        f"other {max(0, n - landmarks):,}"
    )
    st.caption(
        f"**Every one of the {n:,} tokens** of state {name}: a second pass over the corpus writes "
        f"this state to disk ({n * d * 4 / 2**20:,.0f} MiB, kept in the disk cache for the next "
        f"choice, under its limit), then {how}. "
        "The post-processing is fitted on the token sample, as for the sampled view. The points "
        "reach the browser as one binary file, not through the app's websocket."
    )


def every_token_explainer(d: int) -> None:
    explainer(
        "What is this / references: every token",
        f"""
The sampled view projects at most the token sample; this one projects **every token** of one state.
- *Memory*: the extraction keeps statistics and a sample, never every vector. A second pass runs the
  model again and writes this state only ({d} float32 per token) to a file in the isoscope cache;
  everything after reads it in chunks, so memory stays bounded whatever the corpus size.
- *PCA* is exact: the float64 covariance is accumulated over the chunks, then eigendecomposed; the
  post-processing (clip, centring, z-score, all-but-the-top, whitening are affine) transforms that
  covariance, so one pass serves both panels.
- *UMAP / t-SNE* are fitted on a seeded sample of landmark tokens. Every other token is placed by
  an exact nearest-neighbour search among the landmarks (in the same 50-dim PCA the fit saw) at the
  weighted mean of its 15 nearest landmarks' positions, weighted by UMAP's membership strengths, and
  a token equal to a landmark lands on it. This is how UMAP's own `transform` *starts* (McInnes,
  Healy & Melville 2018, arXiv 1802.03426, section on embedding new points); the optimisation
  epochs that follow it there are skipped, because at a million tokens they take hours on a few
  cores. For t-SNE the same placement stands in for openTSNE's `transform` (Poličar, Stražar &
  Zupan 2024, JSS 109), which starts new points from their nearest reference points too. The
  figure names the landmark count.
- *Drawing*: a WebGL scatter in a frame that fetches the points as one binary file from a random
  address known only to this session (TensorBoard's Projector stops at 100,000 points;
  embedding-atlas's Streamlit component sends its data through the app's websocket, which fails
  near 270,000 rows).
""",
    )


def every_token_run(
    loaded: LoadedModel,
    result: ExtractionResult,
    state: int,
    method: str,
    post: PostChoice,
    seed: int,
    landmarks: int,
) -> None:
    """The button, then the work with its Stop, then the atlas and how to use it."""
    from isoscope.engine.errors import IsoscopeError
    from isoscope.engine.extraction.spill import Cancelled

    n = result.num_tokens
    choice = (state, method, post.name, repr(post.options), seed, landmarks)
    if st.session_state.get("proj_every_token") != choice:
        if st.button(f"Project all {n:,} tokens", key="proj_every_token_go", type="primary"):
            st.session_state["proj_every_token"] = choice
            st.rerun()
        return

    def forget() -> None:
        st.session_state.pop("proj_every_token", None)

    control = st.empty()  # "Stop" while the work runs, "Close" once it is drawn
    control.button(
        "Stop", key="proj_every_token_stop", help="Stops the work if nobody else waits for it.",
        on_click=forget,
    )  # fmt: skip
    try:
        payload = corpus_points(loaded, result, state, method, post, seed, landmarks)
    except Cancelled:
        st.info("Stopped.")
        return
    except IsoscopeError as exc:
        st.error(f"**Cannot project every token.** {message(exc)}")
        return
    control.button("Close", key="proj_every_token_close", on_click=forget)
    atlas_chart(payload, key="proj_atlas")
    st.caption(
        "Drag to pan, wheel to zoom, double-click to reset; hold shift (or press *Lasso*) and draw "
        "to select: the selection is highlighted in both panels and its tokens are listed. "
        "Export every token with `isoscope export --points all --state "
        f"{state} --format atlas|projector` (the Projector keeps a seeded 100,000)."
    )
