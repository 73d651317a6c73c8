"""The ablation's forward passes: the extraction's batching and padding rule
(:func:`isoscope.engine.extraction.plan_batches`, :func:`~isoscope.engine.extraction.pad_rows`), all
hidden states on the CPU in float64, and the cosine the effects are measured with."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from isoscope.analysis.anisotropy import cosine_rows
from isoscope.engine.budget.batching import plan_batches
from isoscope.engine.device import to_numpy
from isoscope.engine.extraction import TokenizedCorpus, pad_rows, residual_states
from isoscope.engine.extraction.media import MediaTokens, media_forward
from isoscope.engine.load.models import LoadedModel


def padded(rows: Sequence[np.ndarray], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`isoscope.engine.extraction.pad_rows` as int64 tensors ``(ids, attention_mask)``."""
    ids, mask = pad_rows(rows, pad_id)
    return torch.from_numpy(ids), torch.from_numpy(mask)


def hidden_states_cpu(loaded: LoadedModel, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Every hidden state of one padded batch, float64 (S, B, T, d) on the CPU."""
    out = loaded.encoder(
        input_ids=ids.to(loaded.device),
        attention_mask=mask.to(loaded.device),
        output_hidden_states=True,
    )
    return torch.stack(residual_states(out, loaded.encoder, ids.shape[1])).to(
        "cpu", torch.float64
    )  # (S, B, T, d)


def media_hidden_states_cpu(
    loaded: LoadedModel, tokens: MediaTokens, rows: Sequence[int] | np.ndarray
) -> torch.Tensor:
    """:func:`hidden_states_cpu` of images or clips (``rows`` of ``tokens``; a row may repeat)."""
    hidden_states = media_forward(loaded, tokens, np.asarray(rows, dtype=np.int64))
    return torch.stack(hidden_states).to("cpu", torch.float64)  # (S, B, T, d)


def ablation_batches(tokenized: TokenizedCorpus, batch_size: int) -> list[np.ndarray]:
    """:func:`isoscope.engine.extraction.plan_batches`, with each batch of texts or clips that must
    not be padded (``TokenizedCorpus.group``: FNet's Fourier mixing, group-norm wav2vec2) of one
    length."""
    return plan_batches(tokenized.lengths, batch_size, group=tokenized.group)


def cosines(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """Cosine along the last axis (isoscope.analysis.anisotropy.cosine_rows); zero vectors give 0."""
    return cosine_rows(to_numpy(a), to_numpy(b))
