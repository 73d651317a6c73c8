"""MLM masking: 15 % of the non-special tokens, seeded, the same masks for the original and every
ablation, and the summed masked-token cross-entropy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from isoscope.engine.errors import InputError
from isoscope.engine.extraction import TokenizedCorpus
from isoscope.engine.load.models import LoadedModel

MASK_RATE = 0.15


@dataclass(frozen=True)
class MaskedCorpus:
    """Token ids with 15 % of the non-special tokens replaced by the mask token; ``labels`` hold the
    original id there and -100 elsewhere (at least one masked token per text that has one)."""

    input_ids: list[np.ndarray]
    labels: list[np.ndarray]

    @property
    def num_masked(self) -> int:
        return int(sum((lab >= 0).sum() for lab in self.labels))


def mask_tokens(
    tokenized: TokenizedCorpus, mask_token_id: int, rate: float = MASK_RATE, seed: int = 0
) -> MaskedCorpus:
    """Seeded masking for the MLM loss; the same masks serve the original and every ablation."""
    rng = np.random.default_rng(seed)
    input_ids, labels = [], []
    for ids, special in zip(tokenized.input_ids, tokenized.special, strict=True):
        eligible = np.flatnonzero(~special)
        chosen = eligible[rng.random(len(eligible)) < rate]
        if len(chosen) == 0 and len(eligible):
            chosen = rng.choice(eligible, size=1)
        masked = ids.copy()
        label = np.full_like(ids, -100)
        label[chosen] = ids[chosen]
        masked[chosen] = mask_token_id
        input_ids.append(masked)
        labels.append(label)
    return MaskedCorpus(input_ids, labels)


def mask_token_id(loaded: LoadedModel) -> int:
    token_id = getattr(loaded.tokenizer, "mask_token_id", None)
    if token_id is None:
        raise InputError(
            "the tokenizer has no mask token; the MLM loss needs a masked-LM tokenizer"
        )
    return int(token_id)


def mlm_loss_sum(
    loaded: LoadedModel, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """Summed cross-entropy over the masked positions, per row: float64 (B,)."""
    logits = loaded.model(
        input_ids=ids.to(loaded.device), attention_mask=mask.to(loaded.device)
    ).logits
    picked = labels >= 0
    rows = torch.nonzero(picked.to(logits.device))[:, 0].cpu()
    ce = torch.nn.functional.cross_entropy(
        logits[picked.to(logits.device)].to(torch.float64),
        labels[picked].to(logits.device),
        reduction="none",
    ).cpu()
    return torch.zeros(ids.shape[0], dtype=torch.float64).index_add_(0, rows, ce)
