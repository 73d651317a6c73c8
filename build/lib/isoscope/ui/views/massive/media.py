"""The "Massive activations & sinks" page for image and speech models (pages/massive.py opens it
for a vision or speech encoder): Sun et al.'s massive activations with the tokens that carry them,
Darcet et al.'s high-norm tokens, and the patch norms over the image; for audio the same over each
clip's own frames, drawn on a time axis under the waveform. The arithmetic is in
isoscope.analysis.massive.highnorm."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from isoscope.analysis.massive.highnorm import (
    AudioScan,
    ImageScan,
    scan_audio,
    scan_images,
)
from isoscope.analysis.massive.massive import peak_state
from isoscope.analysis.massive.params import HIGH_NORM_FACTOR
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction.media import model_view
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.params import MASSIVE_ABS_THRESHOLD, MASSIVE_MEDIAN_RATIO, massive_rule
from isoscope.plots.highnorm import (
    audio_high_norm_frame,
    clip_norm_figure,
    high_norm_frame,
    image_norm_overlay,
    norm_by_kind_figure,
    norm_histogram,
)
from isoscope.plots.massive import magnitudes_by_layer_figure, massive_frame
from isoscope.ui.frame.literal import literal, message
from isoscope.ui.frame.page import explainer
from isoscope.ui.frame.tabs import lazy_tabs
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.widgets.charts import chart_with_downloads
from isoscope.ui.work.cached import cached, heavy

SOURCES = """
- Sun, Chen, Kolter & Liu 2024, *Massive Activations in Large Language Models*, section 5 (CLIP ViT-L,
  DINOv2-reg ViT-G), [arXiv 2402.17762](https://arxiv.org/abs/2402.17762)
- Darcet, Oquab, Mairal & Bojanowski 2024, *Vision Transformers Need Registers*, [arXiv
  2309.16588](https://arxiv.org/abs/2309.16588)
"""


@heavy(lambda loaded, *_: f"Scanning {literal(loaded.info.display_name)}:", "images")
def get_image_scan(loaded: LoadedModel, corpus, n_images: int, *, progress) -> ImageScan:
    """Massive activations and token norms of the first ``n_images`` images."""
    return scan_images(loaded, corpus.items[:n_images], progress=progress)


@cached
def get_model_view(loaded: LoadedModel, corpus, index: int) -> np.ndarray:
    """Image ``index`` as the model sees it."""
    return model_view(loaded, corpus.items[index])


def media_massive_view(loaded: LoadedModel, corpus) -> None:
    """The page for an image model or a speech encoder: explainer, scan controls, headline, tabs."""
    kind = "audio" if loaded.layout.modality == "audio" else "image"
    if kind == "image":
        explain()
    else:
        explain_audio(loaded)
    chosen = scan_controls(loaded, corpus, kind)
    if chosen is None:
        return
    scan, state, thresholds = chosen
    headline(loaded, scan, state, thresholds, corpus)
    if kind == "image":
        labels = ["Massive activations", "High-norm tokens", "On the image"]
        views = (
            lambda: massive_tab(scan, "image"),
            lambda: high_norm_tab(scan, corpus, state, thresholds),
            lambda: image_tab(loaded, corpus, scan, state, thresholds),
        )
    else:
        labels = ["Massive activations", "High-norm frames", "On the clip"]
        views = (
            lambda: massive_tab(scan, "audio"),
            lambda: high_norm_frames_tab(scan, corpus, state, thresholds),
            lambda: clip_tab(loaded, corpus, scan, state, thresholds),
        )
    lazy_tabs(labels, views, key=f"massive_{SCAN_KINDS[kind].stem}_tab")


def explain() -> None:
    explainer(
        "What is this / references",
        f"""
**Massive activations** (Sun et al.): a few single values of the hidden states with
|h| > {MASSIVE_ABS_THRESHOLD:g} and about {MASSIVE_MEDIAN_RATIO:g} × the median |h|, in fixed dims, carried by
a few tokens. Sun et al. find them in CLIP ViT-L and in DINOv2-reg ViT-G, where the **register tokens**
carry them. The statistics are those of text models; the carriers here are the [CLS], distillation,
register and patch tokens.

**High-norm tokens** (Darcet et al.): large, well-trained ViTs (DeiT-III, OpenCLIP, DINOv2) grow a few patch
tokens whose hidden-state norm is far above the rest (> ~150 at the output of ViT-L/g, ~2 % of the patches,
in low-information background areas); they hold global information and spoil attention maps. Registers, extra
prefix tokens with no image content, take that role over. A patch is *high-norm* here when its norm is above
a factor × its hidden state's median patch norm (Darcet's 150 is one model's output scale; the table shows
each state's own scale). Tiny random models show neither: both appear with training and size.

Sources: {SOURCES}
""",
    )


@dataclasses.dataclass(frozen=True)
class ScanKind:
    """What the image and the speech scans name differently in their controls and tabs."""

    items: str  # what is scanned, as the count's label says it
    unit: str  # what one token of an item is
    units: str
    stem: str  # of the widget keys and downloads
    count_help: str
    state_help: str | None
    carriers: str  # how the massive table counts its tokens and names its largest
    download: str  # the massive table's download name
    file_column: str  # the item's file in the highest-norm table
    item_key: str  # the item's index in a row of the highest-norm table
    map_key: str  # of the norms drawn over one item: its chart and download
    map_name: str  # its download name, before the item's index


SCAN_KINDS = {
    "image": ScanKind(
        "Images",
        "patch",
        "patches",
        "img",
        "The first images of the corpus, every token (prefix and patches) of each.",
        "For the norm distribution and the image view.",
        "token that carries them; *token* names the largest one's ([CLS], [REGn] or patch rRcC)",
        "massive_activations_images",
        "image file",
        "image",
        "massive_img_overlay",
        "patch_norms_image",
    ),
    "audio": ScanKind(
        "Clips",
        "frame",
        "frames",
        "audio",
        "The first clips of the corpus, every frame of each (and no padding frame).",
        None,
        "frame that carries them; *token* is the largest one's frame start time",
        "massive_activations_audio",
        "clip file",
        "clip",
        "massive_audio_clip",
        "frame_norms_clip",
    ),
}


def scan_controls(
    loaded: LoadedModel, corpus, kind: str = "image"
) -> tuple[ImageScan | AudioScan, int, np.ndarray] | None:
    """The items to scan, the hidden state and the high-norm factor: (scan, state, each state's
    high-norm threshold), or None when the model cannot be scanned (the error is shown). A speech
    scan's notes (clips cut or skipped) are shown under the controls."""
    k = SCAN_KINDS[kind]
    n_max = len(corpus.items)
    c1, c2, c3 = st.columns(3)
    n_items = c1.slider(
        f"{k.items} to scan",
        1,
        n_max,
        min(64, n_max),
        key=f"massive_n_{k.items.lower()}",
        help=k.count_help,
    )
    try:
        scan = (get_image_scan if kind == "image" else get_audio_scan)(loaded, corpus, int(n_items))
    except IsoscopeError as exc:
        st.error(f"**Cannot scan this model.** {message(exc)}")
        return None
    for note in scan.notes if kind == "audio" else ():
        st.info(message(note), icon=":material/info:")
    names = list(scan.massive.state_names)
    state_name = c2.select_slider(
        "Hidden state", names, value=names[-1], key=f"massive_{k.stem}_state", help=k.state_help
    )
    factor = c3.number_input(
        f"High-norm factor (× median {k.unit} norm)",
        HIGH_NORM_FACTOR.low,
        HIGH_NORM_FACTOR.high,
        HIGH_NORM_FACTOR.default,
        HIGH_NORM_FACTOR.step,
        key=f"massive_{k.stem}_factor",
    )
    state = names.index(state_name)
    return scan, state, scan.thresholds(float(factor))


def headline(
    loaded: LoadedModel,
    scan: ImageScan | AudioScan,
    state: int,
    thresholds: np.ndarray,
    corpus=None,
) -> None:
    """The largest |h|, its ratio to the median and the high-norm share at the chosen state; a
    speech scan names the clip (from ``corpus``) and counts frames."""
    massive = scan.massive
    names = list(massive.state_names)
    peak = peak_state(massive)
    shares = scan.high_norm_share(thresholds)
    if isinstance(scan, AudioScan):
        where = f"frame {massive.top_token[peak, 0]} of {corpus.texts[massive.top_text[peak, 0]]}"
        high, counted = "frames", f"{scan.n_clips:,} clips · {massive.n_tokens:,} frames"
    else:
        where = f"token {massive.top_token[peak, 0]} of image {massive.top_text[peak, 0]}"
        high, counted = "patches", f"{scan.n_images:,} images · {massive.n_tokens:,} tokens"
    m1, m2, m3 = st.columns(3)
    m1.metric(
        "Largest |h|",
        f"{massive.top_value[peak, 0]:,.1f}",
        help=f"hidden state {names[peak]}, dim {massive.top_dim[peak, 0]}, {where}",
    )
    m2.metric("× median |h| there", f"{massive.ratio[peak]:,.0f}")
    m3.metric(f"High-norm {high} at {names[state]}", f"{shares[state]:.1%}")
    st.caption(
        f"{literal(loaded.info.display_name)} · {counted} ({loaded.layout.describe()}) · {scan.seconds:.1f} s"
    )


def massive_tab(scan: ImageScan | AudioScan, kind: str) -> None:
    """The largest activations by hidden state, and the tokens (patches or frames) that carry them."""
    k = SCAN_KINDS[kind]
    massive = scan.massive
    fig = magnitudes_by_layer_figure(massive)
    st.plotly_chart(fig, width="stretch", key=f"massive_{k.stem}_layers_chart")
    frame = massive_frame(massive)
    st.dataframe(frame, hide_index=True, width="stretch")
    download_buttons(
        f"massive_{k.stem}_layers",
        fig=fig,
        frame=frame,
        json_data=massive.layers(),
        name=k.download,
    )
    st.caption(
        f"The *at …* columns count the massive activations ({massive_rule()}) by the {k.carriers}."
    )


def high_norm_tab(scan: ImageScan, corpus, state: int, thresholds: np.ndarray) -> None:
    fig_kind = norm_by_kind_figure(scan)
    st.plotly_chart(fig_kind, width="stretch", key="massive_img_kind_chart")
    fig_hist = norm_histogram(scan, state, float(thresholds[state]))
    st.plotly_chart(fig_hist, width="stretch", key="massive_img_hist_chart")
    frame = high_norm_frame(scan, thresholds)
    st.dataframe(frame, hide_index=True, width="stretch")
    download_buttons("massive_img_norms", fig=fig_kind, frame=frame, name="high_norm_tokens")
    top = scan.top_patches(state, float(thresholds[state]))
    highest_norm_table(top, corpus, scan, state, thresholds, "image")


def highest_norm_table(
    top: list[dict],
    corpus,
    scan: ImageScan | AudioScan,
    state: int,
    thresholds: np.ndarray,
    kind: str,
) -> None:
    """The highest-norm patches (frames) above the state's threshold, each with its item's file."""
    k = SCAN_KINDS[kind]
    state_name = scan.massive.state_names[state]
    if top:
        st.markdown(f"**Highest-norm {k.units} at {state_name}**")
        st.dataframe(
            pd.DataFrame([{k.file_column: corpus.texts[t[k.item_key]]} | t for t in top]),
            hide_index=True,
            width="stretch",
        )
    else:
        st.caption(f"No {k.unit} is above {float(thresholds[state]):.2f} at {state_name}.")


def norm_map_title(
    scan: ImageScan | AudioScan, state: int, thresholds: np.ndarray, kind: str
) -> str:
    state_name = scan.massive.state_names[state]
    circled = f"circled: > {thresholds[state]:.2f}"
    return f"{SCAN_KINDS[kind].unit.capitalize()} norms at hidden state {state_name} ({circled})"


def norm_map(fig: go.Figure, index: int, kind: str) -> None:
    """The norms drawn over one image (clip), with its download."""
    k = SCAN_KINDS[kind]
    chart_with_downloads(
        fig, key=f"{k.map_key}_chart", downloads=k.map_key, name=f"{k.map_name}{index}"
    )


def image_tab(
    loaded: LoadedModel, corpus, scan: ImageScan, state: int, thresholds: np.ndarray
) -> None:
    index = st.selectbox(
        "Image",
        range(scan.n_images),
        format_func=lambda i: f"{i}: {corpus.texts[i]}",
        key="massive_img_index",
    )
    try:
        picture = get_model_view(loaded, corpus, int(index))
    except IsoscopeError as exc:
        st.error(message(exc))
        return
    patch_norms = scan.patch_norms(state, int(index))
    title = norm_map_title(scan, state, thresholds, "image")
    fig = image_norm_overlay(picture, patch_norms, float(thresholds[state]), title=title)
    norm_map(fig, int(index), "image")
    prefix = ", ".join(
        f"{literal(name)} {scan.norms[state, int(index), i]:.2f}"
        for i, name in enumerate(scan.token_names[: scan.prefix])
    )
    st.caption(
        "The image after the processor's resize and crop, the grid of its patches coloured by "
        "their hidden-state norm."
        + (f" Prefix tokens (not on the image): {prefix}." if prefix else "")
    )


# ----------------------------------------------------------------------------- speech encoders
AUDIO_SOURCES = """
- Sun, Chen, Kolter & Liu 2024, *Massive Activations in Large Language Models*, [arXiv
  2402.17762](https://arxiv.org/abs/2402.17762)
- Darcet, Oquab, Mairal & Bojanowski 2024, *Vision Transformers Need Registers*, [arXiv
  2309.16588](https://arxiv.org/abs/2309.16588) (the high-norm rule, here on frames)
- Godey, de la Clergerie & Sagot 2023, *Is Anisotropy Inherent to Transformers?* (speech
  encoders), [arXiv 2306.07656](https://arxiv.org/abs/2306.07656)
- Radford et al. 2022, *Robust Speech Recognition via Large-Scale Weak Supervision* (Whisper),
  [arXiv 2212.04356](https://arxiv.org/abs/2212.04356)
"""


@heavy(lambda loaded, *_: f"Scanning {literal(loaded.info.display_name)}:", "clips")
def get_audio_scan(loaded: LoadedModel, corpus, n_clips: int, *, progress) -> AudioScan:
    """Massive activations and frame norms of the first ``n_clips`` clips, own frames only."""
    return scan_audio(loaded, corpus.items[:n_clips], progress=progress)


def frames_note(loaded: LoadedModel) -> str:
    """Which frames are a clip's, in one sentence (Whisper's padding rule, or the conv arithmetic)."""
    layout = loaded.layout
    if layout.window_frames:
        return (
            f"Whisper pads every clip to {layout.window_frames / layout.frames_per_second:g} s; a "
            f"clip of n samples owns ceil(n / {layout.frame_stride}) frames (the hop length times "
            "the convolutions' stride; frame j is centred on sample "
            f"{layout.frame_stride} j), and the frames past its end are padding, left out of "
            "every number here (Radford et al. 2022)."
        )
    return "A clip's frames are its feature encoder's outputs; no padding frame is counted."


def explain_audio(loaded: LoadedModel) -> None:
    explainer(
        "What is this / references",
        f"""
**Massive activations** (Sun et al.): a few single values of the hidden states with
|h| > {MASSIVE_ABS_THRESHOLD:g} and about {MASSIVE_MEDIAN_RATIO:g} × the median |h|, in fixed dims, carried by
a few tokens (in LLMs the first token and delimiters). Here the tokens are audio frames, and the carriers
are a clip's **first frame** and its other frames.

**High-norm frames**: Darcet et al.'s high-norm patch tokens, asked of frames: a frame is *high-norm* when
its hidden-state norm is above a factor × its state's median frame norm. Godey et al. find speech encoders
(wav2vec2, HuBERT) anisotropic like text models; whether they also grow massive activations and high-norm
frames is what this page measures.

{frames_note(loaded)}

Sources: {AUDIO_SOURCES}
""",
    )


def high_norm_frames_tab(scan: AudioScan, corpus, state: int, thresholds: np.ndarray) -> None:
    frame = audio_high_norm_frame(scan, thresholds)
    st.dataframe(frame, hide_index=True, width="stretch")
    download_buttons("massive_audio_norms", frame=frame, name="high_norm_frames")
    top = scan.top_frames(state, float(thresholds[state]))
    highest_norm_table(top, corpus, scan, state, thresholds, "audio")


def clip_tab(
    loaded: LoadedModel, corpus, scan: AudioScan, state: int, thresholds: np.ndarray
) -> None:
    index = int(
        st.selectbox(
            "Clip",
            range(scan.n_clips),
            format_func=lambda i: f"{i}: {corpus.texts[i]} ({int(scan.frames[i])} frames)",
            key="massive_audio_clip",
        )
    )
    if not scan.frames[index]:
        st.info(
            f"{literal(corpus.texts[index])} gives no frame: it is shorter than the model reads."
        )
        return
    title = norm_map_title(scan, state, thresholds, "audio")
    fig = clip_norm_figure(scan, index, state, float(thresholds[state]), title=title)
    norm_map(fig, index, "audio")
    st.caption(
        "The clip at the model's sampling rate, above its own frames' hidden-state norms on "
        "the same time axis (a frame at its start time). " + frames_note(loaded)
    )
