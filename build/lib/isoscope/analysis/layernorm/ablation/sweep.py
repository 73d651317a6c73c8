"""One dimension at a time over all dims on a small batch (:func:`sweep`): ``copies`` ablated
copies of the batch per forward pass, each masked by a hook, so no weights are touched."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from isoscope.analysis.layernorm.ablation.forward import (
    cosines,
    hidden_states_cpu,
    media_hidden_states_cpu,
    padded,
)
from isoscope.analysis.layernorm.ablation.masking import (
    MASK_RATE,
    mask_token_id,
    mask_tokens,
    mlm_loss_sum,
)
from isoscope.analysis.layernorm.ablation.surgery import (
    ablated,
    masked_norms,
    parse_dims,
    private_copy,
)
from isoscope.analysis.layernorm.params import NormSite, norms_of, select_norms
from isoscope.engine.budget.progress import Progress
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import TokenizedCorpus, pad_token_id, tokenize
from isoscope.engine.extraction.media import MediaTokens, is_media, prepare_media
from isoscope.engine.extraction.pooling import masked_mean
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.naming import hidden_state_names


@dataclass(frozen=True)
class SweepResult:
    """One-dimension-at-a-time ablation: row i is dim ``dims[i]``; arrays (n_dims, S).

    ``complete`` is False when the sweep was stopped; then only the first ``len(dims)`` dims ran.
    """

    dims: np.ndarray
    embedding_cosine: np.ndarray
    token_cosine: np.ndarray
    mlm_loss: np.ndarray | None
    mlm_loss_original: float | None
    norms: list[str]
    state_names: list[str]
    num_texts: int
    complete: bool
    seconds: float
    method: str

    def frame(self, state: int = -1):
        import pandas as pd  # lazy: a slow import that only the table views need

        data = {
            "dim": self.dims,
            "embedding_cosine": self.embedding_cosine[:, state],
            "embedding_drift": 1.0 - self.embedding_cosine[:, state],
            "token_cosine": self.token_cosine[:, state],
        }
        if self.mlm_loss is not None:
            data["mlm_loss"] = self.mlm_loss
        return pd.DataFrame(data)

    def to_json(self) -> dict:
        return {
            "dims": self.dims.tolist(),
            "norms": self.norms,
            "state_names": self.state_names,
            "embedding_cosine": self.embedding_cosine.tolist(),
            "token_cosine": self.token_cosine.tolist(),
            "mlm_loss": None if self.mlm_loss is None else self.mlm_loss.tolist(),
            "mlm_loss_original": self.mlm_loss_original,
            "num_texts": self.num_texts,
            "complete": self.complete,
            "seconds": self.seconds,
            "method": self.method,
        }


def _one_length(items: list) -> list:
    """Clips share one forward pass only when a model that must not pad them (group-norm
    wav2vec2) gets clips of one length: keep those of the commonest length."""
    lengths = [len(item.data) for item in items]
    common = max(set(lengths), key=lambda n: (lengths.count(n), n))
    return [item for item, n in zip(items, lengths, strict=True) if n == common]


def _prepared(
    target: LoadedModel, texts: Sequence, max_length: int, media: bool
) -> TokenizedCorpus | MediaTokens:
    """The sweep's one batch: tokenized texts, or prepared images / clips (unpadded texts or clips
    of the commonest length for a model that must not pad them)."""
    if not media:
        tokenized = tokenize(target, tuple(texts), max_length)
        if tokenized.group is None:
            return tokenized
        lengths = tokenized.lengths.tolist()  # padding moves this model's tokens
        common = max(set(lengths), key=lambda n: (lengths.count(n), n))
        kept = tuple(t for t, n in zip(texts, lengths, strict=True) if n == common)
        return tokenize(target, kept, max_length)
    items = list(texts)
    if not target.layout.pad_with_mask and target.layout.modality == "audio":
        items = _one_length(items)  # one forward pass holds them all, unpadded
    return prepare_media(target, items)


def _dim_mask(chunk: list[int], rows: int, width: int, device: torch.device) -> torch.Tensor:
    """(len(chunk) * rows, 1, width) ones, copy c with dim ``chunk[c]`` zeroed: one ablated dim
    per copy of the batch for :func:`masked_norms`."""
    dim_mask = torch.ones(len(chunk) * rows, 1, width, dtype=torch.float32, device=device)
    for c, j in enumerate(chunk):
        dim_mask[c * rows : (c + 1) * rows, 0, j] = 0
    return dim_mask


def _batched_mlm_losses(
    target: LoadedModel,
    sites: list[NormSite],
    dim_mask: torch.Tensor,
    mids: torch.Tensor,
    mask: torch.Tensor,
    labels: torch.Tensor,
) -> torch.Tensor:
    """The MLM loss sum per row of every masked copy (:func:`_dim_mask`), a few copies per pass:
    logits are (rows, T, vocab), kept under ~256 MB."""
    B = mids.shape[0]
    m = dim_mask.shape[0] // B
    config: Any = target.model.config
    vocab = int(config.vocab_size)
    per_pass = max(1, min(m, (256 << 20) // max(1, B * mids.shape[1] * vocab * 4)))
    parts = []
    for a in range(0, m, per_pass):
        sub = dim_mask[a * B : min(m, a + per_pass) * B]
        k = sub.shape[0] // B
        with masked_norms(sites, sub):
            parts.append(
                mlm_loss_sum(target, mids.repeat(k, 1), mask.repeat(k, 1), labels.repeat(k, 1))
            )
    return torch.cat(parts)


def _masked_inputs(
    target: LoadedModel, tokenized: TokenizedCorpus, pad_id: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(masked ids, labels, masked-token count)`` of the batch for the MLM loss (padded as the
    batch is; labels -100 where nothing is masked)."""
    masked = mask_tokens(tokenized, mask_token_id(target), MASK_RATE, seed)
    mids, _ = padded(masked.input_ids, pad_id)
    labels, _ = padded(masked.labels, -100)
    return mids, labels, max(masked.num_masked, 1)


def sweep(
    loaded: LoadedModel,
    texts: Sequence[str],
    *,
    dims: Sequence[int] | None = None,
    norms=None,
    max_length: int = 64,
    copies: int = 16,
    method: str = "batched",
    mlm: bool = True,
    seed: int = 0,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
    in_place: bool = False,
) -> SweepResult:
    """Ablate each dim alone (in ``norms``, default the output LN of every layer) on ``texts``
    (keep it small: 8-16 texts) and measure the drift of every hidden state.

    ``method="batched"`` (exact, fast): ``copies`` dims per forward pass via :func:`masked_norms`;
    ``method="naive"``: one forward per dim under :func:`ablated` (the reference).
    ``progress(done, total)`` returning False, or ``stop.set()``, stops after the current pass.
    """
    if method not in ("batched", "naive"):
        raise InputError(f"unknown sweep method {method!r}; use batched or naive")
    if copies < 1:
        raise InputError("copies per forward pass must be at least 1")
    started = time.perf_counter()
    width = loaded.info.hidden_size
    all_dims = list(range(width)) if dims is None else parse_dims(list(dims), width)
    target = loaded if in_place else private_copy(loaded)
    sites = select_norms(norms_of(target), norms)
    media = is_media(texts)
    tokenized = _prepared(target, texts, max_length, media)
    pad_id = 0 if media else pad_token_id(target)
    ids, mask = padded(tokenized.input_ids, pad_id)
    B = ids.shape[0]
    keep = mask.bool()
    rows = np.arange(B)

    def forward(copies: int) -> torch.Tensor:
        if isinstance(tokenized, MediaTokens):  # media
            return media_hidden_states_cpu(target, tokenized, np.tile(rows, copies))
        return hidden_states_cpu(target, ids.repeat(copies, 1), mask.repeat(copies, 1))

    use_mlm = mlm and target.info.has_mlm_head and not media
    if use_mlm:
        mids, labels, n_masked = _masked_inputs(target, tokenized, pad_id, seed)
    S = target.info.num_layers + 1
    emb_cos = np.full((len(all_dims), S), np.nan)
    tok_cos = np.full((len(all_dims), S), np.nan)
    losses = np.full(len(all_dims), np.nan) if use_mlm else None
    step = copies if method == "batched" else 1
    chunks = [all_dims[i : i + step] for i in range(0, len(all_dims), step)]
    done_dims = 0
    complete = True
    with torch.inference_mode():
        original = forward(1)
        pooled_original = masked_mean(original, mask)  # (S, B, d)
        loss_original = (
            float(mlm_loss_sum(target, mids, mask, labels).sum()) / n_masked if use_mlm else None
        )
        for chunk in chunks:
            if stop is not None and stop.is_set():
                complete = False
                break
            m = len(chunk)
            if method == "batched":
                dim_mask = _dim_mask(chunk, B, width, target.device)
                with masked_norms(sites, dim_mask):
                    hidden = forward(m)
                if use_mlm:
                    per_row = _batched_mlm_losses(target, sites, dim_mask, mids, mask, labels)
            else:
                with ablated(target, chunk, sites):
                    hidden = forward(1)
                    if use_mlm:
                        per_row = mlm_loss_sum(target, mids, mask, labels)
            hidden = hidden.reshape(S, m, B, *hidden.shape[2:])  # (S, m, B, T, d)
            for c in range(m):
                h = hidden[:, c]
                row = done_dims + c
                emb_cos[row] = cosines(masked_mean(h, mask), pooled_original).mean(axis=1)
                tok_cos[row] = cosines(h[:, keep], original[:, keep]).mean(axis=1)
                if use_mlm:
                    assert losses is not None  # made for use_mlm
                    losses[row] = float(per_row[c * B : (c + 1) * B].sum()) / n_masked
            done_dims += m
            if progress is not None and progress(done_dims, len(all_dims)) is False:
                complete = done_dims == len(all_dims)
                break
    return SweepResult(
        dims=np.asarray(all_dims[:done_dims]),
        embedding_cosine=emb_cos[:done_dims],
        token_cosine=tok_cos[:done_dims],
        mlm_loss=None if losses is None else losses[:done_dims],
        mlm_loss_original=loss_original,
        norms=[s.name for s in sites],
        state_names=hidden_state_names(target.info.num_layers),
        num_texts=B,
        complete=complete,
        seconds=time.perf_counter() - started,
        method=method,
    )
