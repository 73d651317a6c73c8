"""Host-side batches for the analyses that need full hidden states (similarity, positional
probes, the per-text views): :func:`forward_batches`, :func:`mean_pooled`, :func:`encode_text`."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from isoscope.engine.budget.batching import equal_run, length_order
from isoscope.engine.budget.progress import Progress
from isoscope.engine.device import to_numpy
from isoscope.engine.extraction.forward import forward_hidden_states, pad_batch, pad_token_id
from isoscope.engine.extraction.media import (
    MediaTokens,
    is_media,
    media_forward,
    prepare_media,
)
from isoscope.engine.extraction.pooling import masked_mean
from isoscope.engine.extraction.tokenization import TokenizedCorpus, is_punct, tokenize
from isoscope.engine.extraction.types import TokenTable
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.params import BATCH_SIZE, MAX_LENGTH


def forward_batches(
    loaded: LoadedModel,
    tokenized: TokenizedCorpus,
    batch_size: int,
    progress: Progress | None = None,
) -> Iterator[tuple[np.ndarray, torch.Tensor, torch.Tensor]]:
    """Yield ``(text_ids (B,), hidden (S, B, T, d) float32 on CPU, attention_mask (B, T) bool)``.

    Texts are sorted by length (longest first, so memory trouble shows at once) and right-padded.
    Images and clips (:class:`MediaTokens`) go through :func:`media_forward`; texts or clips of a
    model that must not be padded come in batches of one length (``tokenized.group``).
    """
    lengths = tokenized.lengths
    order = length_order(lengths, tokenized.group)
    media = isinstance(tokenized, MediaTokens)
    pad_id = 0 if media else pad_token_id(loaded)
    done = start = 0
    with torch.inference_mode():
        while start < len(order):
            count = batch_size
            if tokenized.group is not None:
                count = equal_run(tokenized.group, order, start, batch_size)
            batch_ids = order[start : start + count]
            start += len(batch_ids)
            ids, mask = pad_batch(tokenized, batch_ids, pad_id)
            if isinstance(tokenized, MediaTokens):
                hidden_states = media_forward(loaded, tokenized, batch_ids)
            else:
                hidden_states = forward_hidden_states(loaded, ids, mask)
            hidden = torch.stack(hidden_states).to("cpu", torch.float32)  # (S, B, T, d)
            done += len(batch_ids)
            if progress is not None:
                progress(done, len(order))
            yield batch_ids, hidden, torch.from_numpy(mask).bool()


def mean_pooled(
    loaded: LoadedModel,
    texts: list[str] | tuple[str, ...],
    max_length: int = MAX_LENGTH.default,
    batch_size: int = BATCH_SIZE.default,
    progress: Progress | None = None,
) -> np.ndarray:
    """Mean-pooled text vectors per hidden state, float64 (S, n_texts, d).

    Pools over every non-padding token, special tokens included, as sentence-transformers does
    (its Pooling module clamps the mask sum; so do we). ``texts`` may be images or clips
    (:class:`isoscope.engine.inputs.media.MediaItem`): one vector per item, over all its output tokens.
    """
    tokenized: TokenizedCorpus
    if is_media(texts):
        tokenized = prepare_media(loaded, list(texts))
    else:
        tokenized = tokenize(loaded, tuple(texts), max_length)
    num_states = loaded.info.num_layers + 1
    pooled = np.zeros((num_states, len(texts), loaded.info.hidden_size))
    for batch_ids, hidden, attn in forward_batches(loaded, tokenized, batch_size, progress):
        pooled[:, batch_ids, :] = to_numpy(masked_mean(hidden.double(), attn))
    return pooled


def encode_text(
    loaded: LoadedModel, text: str, max_length: int = MAX_LENGTH.default
) -> tuple[np.ndarray, TokenTable]:
    """Full hidden states of one text: float32 (S, T, d) and its token table (per-text views)."""
    tokenized = tokenize(loaded, (text,), max_length)
    ((_, hidden, _),) = list(forward_batches(loaded, tokenized, 1))
    ids = tokenized.input_ids[0]
    tokens_str = np.array(loaded.tokenizer.convert_ids_to_tokens(ids.tolist()), dtype=str)
    special = tokenized.special[0]
    table = TokenTable(
        text_id=np.zeros(len(ids), dtype=np.int32),
        position=np.arange(len(ids), dtype=np.int32),
        token=tokens_str,
        word_id=tokenized.word_ids[0],
        is_special=special,
        is_punct=np.array([is_punct(t) for t in tokens_str]) & ~special,
    )
    return to_numpy(hidden[:, 0], dtype=None), table
