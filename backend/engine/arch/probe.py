"""One forward pass on a random input of the kind a model reads: the traced pass of
:mod:`isoscope.engine.arch.tracing` and the causality test of :mod:`isoscope.engine.arch.causality`."""

from __future__ import annotations

from typing import Any, cast

import torch

from isoscope.engine.arch.layout import (
    ascending_noise,
    feature_window,
    forward_parameters,
    modality_of,
    reads_spectrogram,
)
from isoscope.engine.arch.lookup import input_device

TRACE_TOKENS = 8  # length of the traced text
TRACE_SAMPLES = 16000  # samples of the traced audio clip: 1 s at wav2vec2's 16 kHz


def probe_vocab(model: torch.nn.Module) -> int:
    """Token ids a probe may draw from: the config's ``vocab_size``, else the input embedding's
    rows, else the 256 byte values (CANINE hashes code points and has neither)."""
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    if vocab <= 0:
        try:
            vocab = int(cast(Any, model).get_input_embeddings().num_embeddings)
        except Exception:
            vocab = 256
    return vocab


def trace_ids(model: torch.nn.Module, n: int = TRACE_TOKENS, seed: int = 0) -> torch.Tensor:
    vocab = probe_vocab(model)
    low = min(5, max(vocab - 2, 0))
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(low, max(vocab, low + 1), (1, n), generator=gen)


def forward_ids(
    model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor | None = None, **extra: Any
) -> Any:
    """``model`` on the token ids ``ids`` (1, T) with ``mask`` (default: every position real)."""
    ids = ids.to(input_device(model))
    mask = torch.ones_like(ids) if mask is None else mask.to(ids.device)
    return model(input_ids=ids, attention_mask=mask, **no_cache(model), **extra)


def no_cache(model: torch.nn.Module) -> dict[str, Any]:
    """``{"use_cache": False}`` where the model's forward takes it (no key/value cache is built
    for a pass whose states are all that is read), else nothing."""
    takes = "use_cache" in forward_parameters(model)
    return (
        {"use_cache": False}
        if takes and getattr(model.config, "use_cache", None) is not None
        else {}
    )


def trace_forward(model: torch.nn.Module, seed: int = 0, **extra: Any) -> Any:
    """One forward pass on a random input of the kind the model reads (its forward's argument
    names say which: token ids, ``pixel_values`` of its configured image size, a clip of
    ``input_values``, or a window of ``input_features`` mel frames); ``extra`` goes to the
    forward as it is (e.g. ``output_hidden_states=True``)."""
    modality = modality_of(model)
    if modality == "text":
        return forward_ids(model, trace_ids(model, seed=seed), **extra)
    gen = torch.Generator().manual_seed(seed)
    device = input_device(model)
    dtype = next(model.parameters()).dtype
    if reads_spectrogram(model):
        bins = int(getattr(model.config, "num_mel_bins", 80) or 80)
        features = torch.randn((1, bins, feature_window(model)), generator=gen)
        return model(input_features=features.to(device, dtype), **extra)
    if modality == "audio":
        values = torch.randn((1, TRACE_SAMPLES), generator=gen).to(device, dtype)
        return model(input_values=values, **extra)
    config = getattr(model, "config", None)
    size = getattr(config, "image_size", 224)
    height, width = (size, size) if isinstance(size, int) else tuple(size)[:2]
    channels = int(getattr(config, "num_channels", 3) or 3)
    pixels = torch.randn((1, channels, height, width), generator=gen).to(device, dtype)
    if "noise" in forward_parameters(model):  # ViTMAE: every patch, in order
        extra["noise"] = ascending_noise(model, 1, height, width)
    return model(pixel_values=pixels, **extra)
