"""The shared sidebar: model, corpus and extraction settings, what will run, and "Run analysis".

The inputs live in a fragment (:func:`_selection_panel`): changing one reruns only the sidebar,
so the line "Run analysis will analyse …" is always current, and the page below keeps showing
the last analysis until the button is pressed (then the whole app reruns on the new selection).

Structure (one function per block, so a new control is one function plus one call line):
- :func:`model_inputs` -> :class:`ModelChoice` (a non-empty "Custom model" wins over the preset);
- :func:`runtime_inputs` -> device, dtype, pickle opt-in;
- :func:`corpus_inputs` -> :class:`CorpusChoice`;
- :func:`settings_inputs` -> ``ExtractionSettings`` field changes; a new setting is a function in
  its own ``ui/*.py`` returning ``{field: value}``, merged there with one ``changes |= …`` line;
- extra sections before or after the panel are one call line each in :func:`sidebar`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

import streamlit as st

from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionSettings
from isoscope.engine.load.models import source_is_causal
from isoscope.engine.load.source import (
    DEFAULT_SOURCE,
    RANDOM_FAMILIES,
    SMOLLM2_SOURCE,
    random_like_source,
    random_source,
    source_label,
)
from isoscope.engine.params import SAMPLE_SIZE
from isoscope.ui.frame.cache_panel import budget_label, cache_panel, sample_budget_input
from isoscope.ui.frame.failure import fragment
from isoscope.ui.frame.literal import literal, message
from isoscope.ui.frame.selection import Selection, get_selection
from isoscope.ui.frame.session import SELECTION_KEY
from isoscope.ui.server import access
from isoscope.ui.sharing.saved import saved_panel
from isoscope.ui.widgets.upload import file_upload
from isoscope.ui.work.corpora import remember_upload
from isoscope.ui.work.media import folder_input

CUSTOM = "custom"
# The menu's order; names and labels come from isoscope.engine.load.source (listed once there).
_MENU = (
    DEFAULT_SOURCE,
    random_like_source(DEFAULT_SOURCE),
    *(random_source(f) for f in ("bert", "bert-nope", "gpt2", "gpt2-nope")),
    SMOLLM2_SOURCE,
    *(random_source(f) for f in ("vit", "wav2vec2")),
)
MODEL_PRESETS = {
    **{source_label(s): s for s in _MENU},
    "local folder, Hub id (org/name[@revision]), or random:FAMILY…": CUSTOM,
}


def model_b_options(model_a: str) -> dict[str, str]:
    """The Compare page's Model B choices (label -> source) when model A is ``model_a``: a
    random-init copy of A first, then the presets (the last, ``CUSTOM``, takes a typed source)."""
    own = random_like_source(model_a)
    options = {f"random-init copy of A ({own})": own}
    options.update({k: v for k, v in MODEL_PRESETS.items() if v != own})
    return options


CORPUS_CHOICES = (
    "bundled sample corpus",
    "paste text",
    "upload a file",
    "image folder",
    "audio folder",
)
CORPUS_KINDS = ("bundled", "paste", "upload", "images", "audio")
SAMPLE_SIZES = (1000, 2000, 4000, SAMPLE_SIZE.default, 12000, 20000)  # within SAMPLE_SIZE
DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("float32", "bfloat16")


@dataclass(frozen=True)
class ModelChoice:
    """The model the button would run: its source, where it came from, or why there is none."""

    source: str
    origin: str  # "preset" or "custom"
    problem: str | None = None


@dataclass(frozen=True)
class CorpusChoice:
    kind: str  # one of CORPUS_KINDS
    text: str
    upload: Any  # a Streamlit UploadedFile or None


def model_inputs(current: Selection) -> ModelChoice:
    """Model preset and "Custom model". A non-empty custom entry is what runs, whatever the preset
    says (typing a path and pressing Run must not silently analyse the default model)."""
    labels = list(MODEL_PRESETS)
    sources = list(MODEL_PRESETS.values())
    is_preset = current.model_source in sources
    preset = st.selectbox(
        "Model",
        labels,
        index=sources.index(current.model_source) if is_preset else len(labels) - 1,
        key="sb_model_preset",
    )
    rules = access.policy()
    custom = st.text_input(
        "Custom model (used whenever it is filled in)",
        value="" if is_preset else current.model_source,
        key="sb_model_custom",
        placeholder="/path/to/checkpoint, org/name, random:gpt2:layers=6",
        help="A checkpoint folder (config.json + *.safetensors + tokenizer), a Hugging Face Hub id "
        "org/name[@revision] (downloaded once into the Hugging Face cache; safetensors only, "
        "never remote code), or random:FAMILY[:layers=,width=,heads=,seed=,init_std=] with "
        f"FAMILY {', '.join(RANDOM_FAMILIES)}. When this field is not empty it is the "
        "model that runs; clear it to use the Model choice above."
        + (
            " On this shared server: Hub ids the operator allows and folders under the operator's "
            "model folders only"
            + (f" ({', '.join(str(d) for d in rules.model_dirs)})" if rules.model_dirs else "")
            + "."
            if rules.shared
            else ""
        ),
    ).strip()
    if custom:
        return ModelChoice(custom, "custom")
    source = MODEL_PRESETS[preset]
    if source == CUSTOM:
        return ModelChoice(
            "", "custom", "type a checkpoint folder, Hub id or random:FAMILY in Custom model"
        )
    return ModelChoice(source, "preset")


def runtime_inputs(current: Selection) -> tuple[bool, str, str]:
    """Pickle opt-in (not on a shared server), device and dtype."""
    allow_pickle = access.policy().allow_pickle and st.checkbox(
        "Allow pickle .bin weights",
        value=current.allow_pickle,
        key="sb_allow_pickle",
        help="Pickle files can run code when loaded. Only tick this for checkpoints you trust.",
    )
    c1, c2 = st.columns(2)
    device = c1.selectbox("Device", DEVICES, index=DEVICES.index(current.device), key="sb_device")
    dtype = c2.selectbox(
        "Dtype",
        DTYPES,
        index=DTYPES.index(current.dtype),
        key="sb_dtype",
        help="bfloat16 only on a GPU. float16 is not offered: it clips outlier values.",
    )
    return bool(allow_pickle), device, dtype


def corpus_inputs(current: Selection) -> CorpusChoice:
    choice = st.radio(
        "Corpus",
        CORPUS_CHOICES,
        index=CORPUS_KINDS.index(current.corpus_kind),
        key="sb_corpus_kind",
    )
    kind = CORPUS_KINDS[CORPUS_CHOICES.index(choice)]
    text, upload = current.corpus_text, None
    if kind == "paste":
        text = st.text_area(
            "Texts (one per line)", value=current.corpus_text, key="sb_corpus_text", height=100
        )
    elif kind == "upload":
        upload = file_upload(
            "File (.txt one text per line; .csv/.jsonl with a text column)",
            type=["txt", "csv", "jsonl"],
            key="sb_corpus_file",
        )
    elif kind in ("images", "audio"):
        text = folder_input(kind, current.corpus_text if current.corpus_kind == kind else "")
    return CorpusChoice(kind, text, upload)


def settings_inputs(
    current: ExtractionSettings, causal: bool = False, current_causal: bool = False
) -> dict[str, Any]:
    """Changes to the extraction settings, as ``{field: value}`` for ``dataclasses.replace``.

    ``causal``: the model that would run is a decoder, so 'exclude the first position' starts on
    (``current_causal``: the model now shown is one, so its setting carries over)."""
    changes: dict[str, Any] = {
        "max_length": int(
            st.slider(
                "Max tokens per text", 8, 512, current.max_length, step=8, key="sb_max_length"
            )
        ),
        "sample_size": int(
            st.select_slider(
                "Token sample for pairwise views",
                SAMPLE_SIZES,
                value=current.sample_size
                if current.sample_size in SAMPLE_SIZES
                else SAMPLE_SIZE.default,
                key="sb_sample_size",
            )
        ),
        "exclude_special": bool(
            st.checkbox(
                "Exclude special tokens ([CLS], [SEP]…)",
                value=current.exclude_special,
                key="sb_exclude_special",
            )
        ),
        "exclude_first": bool(
            st.checkbox(
                "Exclude the first position",
                # one widget per model kind: switching to a decoder turns it on, to an encoder off
                value=current.exclude_first if causal == current_causal else causal,
                key=f"sb_exclude_first_{'decoder' if causal else 'encoder'}",
                help="Leave position 0 of every text out of the statistics, anisotropy and "
                "projections. In decoders the first token carries massive activations (Sun et al. "
                "2024) that dominate means and cosines; the 'Massive activations & sinks' page "
                "always includes it. On by default for causal models.",
            )
        ),
    }
    changes |= sample_budget_input(current)
    return changes


def corpus_label(kind: str, file_name: str = "", folder: str = "") -> str:
    if kind in ("images", "audio"):
        return f"{kind} folder {folder}" if folder else f"bundled demo {kind}"
    return {
        "bundled": "bundled sample corpus",
        "paste": "pasted text",
        "upload": file_name or "uploaded file",
    }[kind]


def describe(sel: Selection) -> str:
    """One line naming the model, corpus and the settings that change the numbers (Markdown; the
    model, file and folder names shown literally)."""
    s = sel.settings
    return (
        f"**{literal(sel.model_source)}** on the "
        f"**{literal(corpus_label(sel.corpus_kind, sel.corpus_file_name, sel.corpus_text))}** "
        f"· {s.max_length} tokens per text · {s.sample_size:,}-token sample"
        + (" · special tokens excluded" if s.exclude_special else "")
        + (" · first position excluded" if s.exclude_first else "")
        + budget_label(s)
        + (f" · {sel.device}" if sel.device != "auto" else "")
        + (f" · {sel.dtype}" if sel.dtype != "float32" else "")
    )


def _is_causal(source: str) -> bool:
    """:func:`source_is_causal`, but on a shared server only for sources a visitor may load (it
    reads the folder's config, which would tell a visitor what is on the server)."""
    try:
        access.policy().check_model_source(source)
    except IsoscopeError:
        return False
    return source_is_causal(source)


def _upload_identity(upload: Any) -> tuple[str, str]:
    if upload is None:
        return "", ""
    return upload.name, hashlib.sha256(upload.getvalue()).hexdigest()[:20]


def pending_selection(
    current: Selection,
    model: ModelChoice,
    runtime: tuple[bool, str, str],
    corpus: CorpusChoice,
    changes: dict[str, Any],
) -> Selection:
    """The selection the inputs describe; raises IsoscopeError with the first thing to fix."""
    if model.problem:
        raise IsoscopeError(f"No model to run: {model.problem}.")
    rules = access.policy()
    rules.check_model_source(model.source)  # a shared server's one refusal text
    if corpus.kind == "upload" and corpus.upload is None:
        raise IsoscopeError("Choose a file to upload first (or pick another corpus).")
    file_name, file_sha = _upload_identity(corpus.upload)
    allow_pickle, device, dtype = runtime
    return Selection(
        model.source,
        device,
        dtype,
        allow_pickle,
        corpus.kind,
        corpus.text if corpus.kind in ("paste", "images", "audio") else "",
        file_name,
        file_sha,
        replace(current.settings, **changes),
    )


@fragment
def _selection_panel() -> None:
    """Inputs, the line saying what will run, and the button (a fragment: see the module doc)."""
    current = get_selection()
    model = model_inputs(current)
    runtime = runtime_inputs(current)
    corpus = corpus_inputs(current)
    changes = settings_inputs(
        current.settings,
        causal=_is_causal(model.source),
        current_causal=_is_causal(current.model_source),
    )
    try:
        pending: Selection | None = pending_selection(current, model, runtime, corpus, changes)
        problem = None
    except IsoscopeError as exc:
        pending, problem = None, str(exc)
    if pending is None:
        st.warning(message(problem))
    elif pending != current:
        st.info(f"**Run analysis** will analyse {describe(pending)}.", icon=":material/play_arrow:")
    clicked = st.button(
        "Run analysis", type="primary", width="stretch", key="sb_run", disabled=pending is None
    )
    if clicked and pending is not None:
        if corpus.upload is not None:
            remember_upload(pending.corpus_file_sha, corpus.upload.name, corpus.upload.getvalue())
        st.session_state[SELECTION_KEY] = pending
        st.rerun()  # scope "app": every page reads the new selection
    st.caption(f"Showing {describe(current)}.")


def sidebar() -> Selection:
    """The shared sidebar; returns the selection the pages analyse."""
    with st.sidebar:
        # Sections above the inputs go here (one call line each).
        saved_panel()
        st.markdown("### Model and corpus")
        _selection_panel()
        # Sections below the inputs go here (one call line each).
        cache_panel()
    return get_selection()
