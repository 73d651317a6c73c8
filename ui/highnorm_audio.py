"""The "Massive activations & sinks" page for speech encoders (wav2vec2, HuBERT, Whisper's
encoder; ui/highnorm.py opens it for an audio model): Sun et al.'s massive activations with the
frames that carry them, high-norm frames (Darcet et al.'s rule on frames), and a clip's frame
norms on a time axis under its waveform, over each clip's own frames only. The arithmetic is in
backend.analysis.decoder.highnorm."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from backend.analysis.decoder.highnorm import HIGH_NORM_FACTOR, AudioScan, scan_audio
from backend.analysis.decoder.massive import peak_state
from backend.engine.errors import IsoscopeError
from backend.engine.models import LoadedModel
from backend.plots.decoder import magnitudes_by_layer_figure, massive_frame
from backend.plots.highnorm import audio_high_norm_frame, clip_norm_figure
from ui.common import download_buttons, explainer, memo_heavy
from ui.tabs import lazy_tabs

SOURCES = """
- Sun, Chen, Kolter & Liu 2024, *Massive Activations in Large Language Models*, [arXiv
  2402.17762](https://arxiv.org/abs/2402.17762)
- Darcet, Oquab, Mairal & Bojanowski 2024, *Vision Transformers Need Registers*, [arXiv
  2309.16588](https://arxiv.org/abs/2309.16588) (the high-norm rule, here on frames)
- Godey, de la Clergerie & Sagot 2023, *Is Anisotropy Inherent to Transformers?* (speech
  encoders), [arXiv 2306.07656](https://arxiv.org/abs/2306.07656)
- Radford et al. 2022, *Robust Speech Recognition via Large-Scale Weak Supervision* (Whisper),
  [arXiv 2212.04356](https://arxiv.org/abs/2212.04356)
"""


def get_audio_scan(loaded: LoadedModel, corpus, n_clips: int) -> AudioScan:
    """Massive activations and frame norms of the first ``n_clips`` clips (memoised per model,
    corpus and count)."""

    def compute(progress) -> AudioScan:
        return scan_audio(loaded, corpus.items[:n_clips], progress=progress)

    key = (loaded.fingerprint, corpus.sha, n_clips)
    return memo_heavy(
        "massive.audio", key, f"Scanning {loaded.info.display_name}:", compute, "clips"
    )


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


def audio_massive_view(loaded: LoadedModel, corpus) -> None:
    """The page for a speech encoder."""
    explainer(
        "What is this / references",
        f"""
**Massive activations** (Sun et al.): a few single values of the hidden states with |h| > 100 and about
1000 × the median |h|, in fixed dims, carried by a few tokens (in LLMs the first token and delimiters).
Here the tokens are audio frames, and the carriers are a clip's **first frame** and its other frames.

**High-norm frames**: Darcet et al.'s high-norm patch tokens, asked of frames: a frame is *high-norm* when
its hidden-state norm is above a factor × its state's median frame norm. Godey et al. find speech encoders
(wav2vec2, HuBERT) anisotropic like text models; whether they also grow massive activations and high-norm
frames is what this page measures.

{frames_note(loaded)}

Sources: {SOURCES}
""",
    )
    n_max = len(corpus.items)
    c1, c2, c3 = st.columns(3)
    n_clips = c1.slider(
        "Clips to scan",
        1,
        n_max,
        min(64, n_max),
        key="massive_n_clips",
        help="The first clips of the corpus, every frame of each (and no padding frame).",
    )
    try:
        scan = get_audio_scan(loaded, corpus, int(n_clips))
    except IsoscopeError as exc:
        st.error(f"**Cannot scan this model.** {exc}")
        return
    for note in scan.notes:
        st.info(note, icon=":material/info:")
    names = list(scan.massive.state_names)
    state_name = c2.select_slider("Hidden state", names, value=names[-1], key="massive_audio_state")
    factor = c3.number_input(
        "High-norm factor (× median frame norm)",
        1.1,
        100.0,
        HIGH_NORM_FACTOR,
        0.1,
        key="massive_audio_factor",
    )
    state = names.index(state_name)
    thresholds = scan.thresholds(float(factor))
    massive = scan.massive
    peak = peak_state(massive)
    shares = scan.high_norm_share(thresholds)
    m1, m2, m3 = st.columns(3)
    m1.metric(
        "Largest |h|",
        f"{massive.top_value[peak, 0]:,.1f}",
        help=f"hidden state {names[peak]}, dim {massive.top_dim[peak, 0]}, frame "
        f"{massive.top_token[peak, 0]} of {corpus.texts[massive.top_text[peak, 0]]}",
    )
    m2.metric("× median |h| there", f"{massive.ratio[peak]:,.0f}")
    m3.metric(f"High-norm frames at {state_name}", f"{shares[state]:.1%}")
    st.caption(
        f"{loaded.info.display_name} · {scan.n_clips:,} clips · {massive.n_tokens:,} frames "
        f"({loaded.layout.describe()}) · {scan.seconds:.1f} s"
    )

    def massive_tab() -> None:
        fig = magnitudes_by_layer_figure(massive)
        st.plotly_chart(fig, width="stretch", key="massive_audio_layers_chart")
        frame = massive_frame(massive)
        st.dataframe(frame, hide_index=True, width="stretch")
        download_buttons(
            "massive_audio_layers",
            fig=fig,
            frame=frame,
            json_data=massive.layers(),
            name="massive_activations_audio",
        )
        st.caption(
            "The *at …* columns count the massive activations (|h| > 100 and > 1000 × the median) "
            "by the frame that carries them; *token* is the largest one's frame start time."
        )

    def high_norm_tab() -> None:
        frame = audio_high_norm_frame(scan, thresholds)
        st.dataframe(frame, hide_index=True, width="stretch")
        download_buttons("massive_audio_norms", frame=frame, name="high_norm_frames")
        top = scan.top_frames(state, float(thresholds[state]))
        if top:
            st.markdown(f"**Highest-norm frames at {state_name}**")
            st.dataframe(
                pd.DataFrame([{"clip file": corpus.texts[t["clip"]]} | t for t in top]),
                hide_index=True,
                width="stretch",
            )
        else:
            st.caption(f"No frame is above {float(thresholds[state]):.2f} at {state_name}.")

    def clip_tab() -> None:
        index = int(
            st.selectbox(
                "Clip",
                range(scan.n_clips),
                format_func=lambda i: f"{i}: {corpus.texts[i]} ({int(scan.frames[i])} frames)",
                key="massive_audio_clip",
            )
        )
        if not scan.frames[index]:
            st.info(f"{corpus.texts[index]} gives no frame: it is shorter than the model reads.")
            return
        fig = clip_norm_figure(
            scan,
            index,
            state,
            float(thresholds[state]),
            title=f"Frame norms at hidden state {state_name} (circled: > {thresholds[state]:.2f})",
        )
        st.plotly_chart(fig, width="stretch", key="massive_audio_clip_chart")
        download_buttons("massive_audio_clip", fig=fig, name=f"frame_norms_clip{index}")
        st.caption(
            "The clip at the model's sampling rate, above its own frames' hidden-state norms on "
            "the same time axis (a frame at its start time). " + frames_note(loaded)
        )

    lazy_tabs(
        ["Massive activations", "High-norm frames", "On the clip"],
        (massive_tab, high_norm_tab, clip_tab),
        key="massive_audio_tab",
    )
