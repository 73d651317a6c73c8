"""Streamlit glue of the Compare page: side B's extraction (another model, or another corpus),
the memoised comparison, and the checkpoint trajectory with a progress bar."""

from __future__ import annotations

import hashlib
from dataclasses import replace

from backend.analysis.compare.comparison import (
    Comparison,
    compare_with_cache,
    comparison_cache_key,
    with_cards,
)
from backend.analysis.compare.trajectory import Trajectory, resolve_checkpoints, run_trajectory
from backend.engine.cache import ResultCache
from backend.engine.extraction import ExtractionResult
from backend.engine.models import LoadedModel, fingerprint_folder
from ui import access
from ui.common import (
    Selection,
    get_corpus,
    get_extraction,
    get_selection,
    media_items,
    memo_heavy,
    remember_upload,
)


def model_b_options(model_a: str) -> dict[str, str]:
    """The Model B choices (label -> source) when model A is ``model_a``: a random-init copy of A
    first, then the sidebar's presets (the last, ``CUSTOM``, takes a typed source)."""
    from ui.sidebar import MODEL_PRESETS

    own = f"random-like:{model_a}"
    options = {f"random-init copy of A ({own})": own}
    options.update({k: v for k, v in MODEL_PRESETS.items() if v != own})
    return options


def model_b_extraction(source: str) -> tuple[LoadedModel, ExtractionResult]:
    """Model ``source`` on the sidebar's corpus and settings (memory, disk cache, else a run)."""
    return get_extraction(source=source)


def corpus_b_selection(kind: str, text: str = "", upload=None) -> Selection:
    """The sidebar's selection with corpus B instead: "bundled", "paste" (``text``) or "upload"."""
    sel = get_selection()
    if kind == "paste":
        return replace(sel, corpus_kind="paste", corpus_text=text)
    if kind == "upload":
        raw = upload.getvalue()
        sha = hashlib.sha256(raw).hexdigest()[:20]
        remember_upload(sha, upload.name, raw)
        return replace(sel, corpus_kind="upload", corpus_file_name=upload.name, corpus_file_sha=sha)
    return replace(sel, corpus_kind="bundled")


def corpus_b_extraction(selection_b: Selection) -> tuple[LoadedModel, ExtractionResult]:
    get_corpus(selection_b)  # a bad corpus raises before any model work
    return get_extraction(selection_b)


def cached_comparison(
    loaded_a: LoadedModel,
    result_a: ExtractionResult,
    loaded_b: LoadedModel,
    result_b: ExtractionResult,
    *,
    pairs=None,
    debiased: bool | None = None,
    label_a: str = "A",
    label_b: str = "B",
) -> Comparison:
    """:func:`backend.analysis.compare.comparison.compare`, memoised by both extraction keys and the options, in
    memory and in the disk cache (a restart reopens it without recomputing the CKA). An image or
    audio analysis passes the sidebar's items, which CKA pools when the tokens differ."""
    options = {
        "loaded_a": loaded_a,
        "loaded_b": loaded_b,
        "pairs": pairs,
        "debiased": debiased,
        "label_a": label_a,
        "label_b": label_b,
        "inputs": media_items(result_a),
    }

    def run(progress) -> Comparison:
        return compare_with_cache(ResultCache(), result_a, result_b, **options)

    key = (comparison_cache_key(result_a, result_b, **options),)
    label = "Comparing A and B (CKA on every pair of hidden states)…"
    return with_cards(memo_heavy("compare.compare", key, label, run), result_a, result_b)


def trajectory_paths(text: str) -> list[str]:
    """One folder per non-empty line of the text box."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def cached_trajectory(paths: list[str]) -> Trajectory:
    """The trajectory of ``paths`` (a folder of checkpoints, or checkpoint folders) on the sidebar's
    corpus and settings, memoised by each checkpoint's fingerprint: adding a checkpoint reruns the
    summary, and the disk cache makes only the new checkpoint's extraction run."""
    sel = get_selection()
    for path in paths:  # a shared server opens only the operator's folders (ui.access)
        access.policy().check_model_source(path)
    checkpoints = resolve_checkpoints(paths)
    corpus = get_corpus(sel)
    key = (
        tuple((c.step, str(c.path), _fingerprint(c.path)) for c in checkpoints),
        corpus.sha,
        sel.settings,
        sel.device,
        sel.dtype,
        sel.allow_pickle,
    )

    def run(progress) -> Trajectory:
        return run_trajectory(
            checkpoints,
            corpus,
            sel.settings,
            device=sel.device,
            dtype=sel.dtype,
            allow_pickle=sel.allow_pickle,
            cache=ResultCache(),
            progress=progress,
        )

    return memo_heavy("trajectory.run", key, "Trajectory:", run, "checkpoints")


def _fingerprint(path) -> str:
    try:
        return fingerprint_folder(path)
    except OSError:
        return "unreadable"
