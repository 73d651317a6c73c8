"""``isoscope massive``: massive activations (Sun et al. 2024), attention sinks (Xiao et
al. 2023; Gu et al. 2024's metric) and LLM.int8-style outlier features (Dettmers et al. 2022) of a
model on a corpus, in one pass over every token (first position included). With ``--images``: the
massive activations of a vision encoder by carrier token ([CLS], register, patch; Sun et al.) and
its high-norm patches (Darcet et al. 2024). With ``--audio``: the same over a speech encoder's frames
(wav2vec2, HuBERT, Whisper), each clip's own frames only (a Whisper clip's padding is left out)."""

from __future__ import annotations

import argparse

from isoscope.analysis.massive.params import (
    HIGH_NORM_FACTOR,
    MASSIVE_BATCH_SIZE,
    MASSIVE_MAX_LENGTH,
)
from isoscope.commands.common import (
    ProgressPrinter,
    add_input_args,
    add_model_args,
    check_out_path,
    load_inputs,
    load_model_from_args,
    progress_line,
    write_json,
)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "massive",
        help="massive activations, attention sinks and int8-style outlier features",
        description="Writes {model, corpus, layers: [{index, name, median_abs, top: [{value, dim, "
        "position, token}], n_massive}], attention_sink: {layers, alpha, share_per_layer, share, "
        "no_attention_layers} (the softmax-attention layers only; null without any), int8: "
        "{dims: [{dim, site_share}], outlier_features}, mixer_sites: [{name, kind, mixer, layer, "
        "width, median_abs, max_abs, outlier_channels}] (norms inside the mixers, gated norms "
        "included, and the SSM input and out_proj input of Mamba / Mamba-2 mixers), notes}. "
        "Positions count from 0 within each text. "
        "With --images (a vision encoder): {model, corpus, layers (position: the output token, token: "
        "its name), carriers: [{state, CLS, distillation, register, patch}], high_norm: [{state, "
        "median_patch_norm, threshold, share}], top_patches}. With --audio (a speech encoder: "
        "wav2vec2, HuBERT, Whisper), over each clip's own frames (position: the frame, token: its "
        "start time): {model, corpus, layers, carriers: [{state, first frame, other frame}], "
        "high_norm: [{state, median_frame_norm, threshold, share}], top_frames: [{file, clip, "
        "frame, time, norm}]}.",
    )
    add_model_args(p, max_length=MASSIVE_MAX_LENGTH, batch_size=MASSIVE_BATCH_SIZE)
    add_input_args(p, ".txt (one text per line), .csv or .jsonl with a text column")
    HIGH_NORM_FACTOR.add_argument(p)
    p.add_argument("--out", required=True, help="output JSON file")
    p.set_defaults(func=run_massive)


def run_massive(args: argparse.Namespace) -> int:
    from isoscope.analysis.massive.massive import peak_state
    from isoscope.analysis.massive.scan import scan_massive
    from isoscope.engine.extraction.media import check_modality

    out = check_out_path(args.out)
    for param in (MASSIVE_MAX_LENGTH, MASSIVE_BATCH_SIZE):  # before any model loads
        param.check(getattr(args, param.name), param.flag)
    HIGH_NORM_FACTOR.check(args.high_norm_factor, HIGH_NORM_FACTOR.flag)
    corpus = load_inputs(args)
    loaded = load_model_from_args(args)
    check_modality(loaded, getattr(corpus, "kind", "text"))
    for notice in corpus.notices:
        progress_line(f"note: {notice}")
    if loaded.layout.modality == "image":
        return _run_images(args, loaded, corpus, out)
    if loaded.layout.modality == "audio":
        return _run_audio(args, loaded, corpus, out)
    scan = scan_massive(
        loaded,
        corpus.texts,
        max_length=args.max_length,
        batch_size=args.batch_size,
        progress=ProgressPrinter(f"scanning {len(corpus)} texts"),
    )
    for note in scan.notes:
        progress_line(f"note: {note}")
    massive = scan.massive
    peak = peak_state(massive)
    progress_line(
        f"largest |h|: {massive.top_value[peak, 0]:.1f} at hidden state {massive.state_names[peak]}, "
        f"dim {massive.top_dim[peak, 0]}, position {massive.top_position[peak, 0]}"
    )
    if scan.sinks is not None:
        progress_line(
            f"sink share (alpha > {scan.sinks.threshold:g}): {scan.sinks.share:.1%} of heads"
        )
    if scan.int8 is not None:
        progress_line(scan.int8.verdict())
    if scan.inner is not None:
        progress_line(
            f"{len(scan.inner.sites)} site(s) inside the mixers read (norm outputs, SSM inputs, "
            "out_proj inputs): see mixer_sites"
        )
    write_json(
        out,
        {
            "model": loaded.info.to_dict(),
            "corpus": {
                "name": corpus.name,
                "sha": corpus.sha,
                "texts": scan.n_texts,
                "tokens": scan.n_tokens,
                "max_length": scan.max_length,
            },
            "layers": massive.layers(),
            "attention_sink": scan.sinks.to_dict() if scan.sinks is not None else None,
            "int8": scan.int8.to_dict() if scan.int8 is not None else None,
            "mixer_sites": scan.inner.to_dict() if scan.inner is not None else [],
            "notes": list(scan.notes),
        },
    )
    return 0


def _run_images(args: argparse.Namespace, loaded, corpus, out) -> int:
    """``--images``: massive activations by carrier token and high-norm patches."""
    import numpy as np

    from isoscope.analysis.massive.highnorm import scan_images
    from isoscope.analysis.massive.massive import peak_state

    scan = scan_images(
        loaded,
        corpus.items,
        batch_size=args.batch_size,
        progress=ProgressPrinter(f"scanning {len(corpus)} images"),
    )
    massive = scan.massive
    thresholds = scan.thresholds(args.high_norm_factor)
    shares = scan.high_norm_share(thresholds)
    peak = peak_state(massive)
    last = massive.state_names[-1]
    progress_line(
        f"largest |h|: {massive.top_value[peak, 0]:.1f} at hidden state {massive.state_names[peak]}, "
        f"dim {massive.top_dim[peak, 0]}, token {massive.top_token[peak, 0]}"
    )
    progress_line(f"high-norm patches at state {last}: {shares[-1]:.1%}")
    median = np.median(scan.norms[:, :, scan.prefix :].reshape(len(thresholds), -1), axis=1)
    write_json(
        out,
        {
            "model": loaded.info.to_dict(),
            "corpus": {
                "name": corpus.name,
                "sha": corpus.sha,
                "images": scan.n_images,
                "tokens": massive.n_tokens,
            },
            "layers": massive.layers(),
            "carriers": _carriers(massive),
            "high_norm": _high_norm(massive.state_names, "patch", median, thresholds, shares),
            "top_patches": [
                {"file": corpus.texts[t["image"]]} | t
                for t in scan.top_patches(len(thresholds) - 1, float(thresholds[-1]))
            ],
        },
    )
    return 0


def _carriers(massive) -> list[dict]:
    return [
        {"state": name} | {k: v for k, v in c.items() if k not in ("dims", "tokens")}
        for name, c in zip(massive.state_names, massive.carriers, strict=True)
    ]


def _high_norm(state_names, unit: str, median, thresholds, shares) -> list[dict]:
    """Per state: the median token norm, the high-norm threshold and the share above it."""
    return [
        {
            "state": name,
            f"median_{unit}_norm": float(median[s]),
            "threshold": float(thresholds[s]),
            "share": float(shares[s]),
        }
        for s, name in enumerate(state_names)
    ]


def _run_audio(args: argparse.Namespace, loaded, corpus, out) -> int:
    """``--audio``: massive activations and high-norm frames over each clip's own frames."""
    from isoscope.analysis.massive.highnorm import scan_audio
    from isoscope.analysis.massive.massive import peak_state

    scan = scan_audio(
        loaded,
        corpus.items,
        batch_size=args.batch_size,
        progress=ProgressPrinter(f"scanning {len(corpus)} clips"),
    )
    for note in scan.notes:
        progress_line(f"note: {note}")
    massive = scan.massive
    thresholds = scan.thresholds(args.high_norm_factor)
    shares = scan.high_norm_share(thresholds)
    peak = peak_state(massive)
    progress_line(
        f"largest |h|: {massive.top_value[peak, 0]:.1f} at hidden state {massive.state_names[peak]}, "
        f"dim {massive.top_dim[peak, 0]}, clip {corpus.texts[massive.top_text[peak, 0]]} "
        f"frame {massive.top_position[peak, 0]} ({massive.top_token[peak, 0]})"
    )
    progress_line(f"high-norm frames at state {massive.state_names[-1]}: {shares[-1]:.1%}")
    write_json(
        out,
        {
            "model": loaded.info.to_dict(),
            "corpus": {
                "name": corpus.name,
                "sha": corpus.sha,
                "clips": scan.n_clips,
                "frames": massive.n_tokens,
                "frames_per_clip": {
                    f: int(n) for f, n in zip(corpus.texts, scan.frames, strict=True)
                },
            },
            "layers": massive.layers(),
            "carriers": _carriers(massive),
            "high_norm": _high_norm(
                massive.state_names, "frame", thresholds / args.high_norm_factor, thresholds, shares
            ),
            "top_frames": [
                {"file": corpus.texts[t["clip"]]} | t
                for t in scan.top_frames(len(thresholds) - 1, float(thresholds[-1]))
            ],
        },
    )
    return 0
