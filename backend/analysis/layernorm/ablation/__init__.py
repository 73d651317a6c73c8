"""Disable LayerNorm dimensions and measure what breaks (Kovaleva et al. 2021, BERT Busters).

"Disabling" dimension j in a LayerNorm sets gamma_j = beta_j = 0, so that norm outputs 0 in
dimension j for every token. BERT Busters (arXiv 2105.06990) zero the outlier dims in the output
LayerNorm of every layer (48 parameters of BERT-base) and find MLM and GLUE wrecked, while random
dims do nothing; Timkey & van Schijndel 2021 (arXiv 2109.04404) measure per-dimension influence.

- :func:`ablated`: context manager that zeroes the parameters and restores them bit-for-bit in
  ``finally`` (also when the body raises).
- :func:`run_ablation`: effects of one set of dims against random controls (same number of random
  dims, one seed each): cosine between original and ablated mean-pooled embeddings and token
  vectors per hidden state, anisotropy change, STS Spearman change (when pairs are given), and
  with an MLM head the masked-token loss (15 % masking, fixed seed, same masks for every run).
- :func:`sweep`: one dimension at a time over all dims on a small batch. Exact and batched:
  ``copies`` ablated copies of the batch go through one forward pass, and a forward hook
  multiplies each copy's norm output by a 0/1 mask (zeroing gamma_j and beta_j makes the norm
  output exactly 0 in dim j, nothing else changes), so no weights are touched at all.

Everything runs on a private copy of the model by default (``in_place=False``): the cached model
that other pages share is never modified, not even for a moment.
"""

from isoscope.analysis.layernorm.ablation.effects import AblationReport, Effect
from isoscope.analysis.layernorm.ablation.masking import MASK_RATE, MaskedCorpus, mask_tokens
from isoscope.analysis.layernorm.ablation.runs import run_ablation
from isoscope.analysis.layernorm.ablation.surgery import (
    ablated,
    has_mlm_checkpoint,
    masked_norms,
    parse_dims,
    private_copy,
    random_control_dims,
)
from isoscope.analysis.layernorm.ablation.sweep import SweepResult, sweep

__all__ = [
    "MASK_RATE",
    "AblationReport",
    "Effect",
    "MaskedCorpus",
    "SweepResult",
    "ablated",
    "has_mlm_checkpoint",
    "mask_tokens",
    "masked_norms",
    "parse_dims",
    "private_copy",
    "random_control_dims",
    "run_ablation",
    "sweep",
]
