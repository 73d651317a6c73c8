"""The first position's share of the geometry: anisotropy and the largest |mean| per hidden state,
with and without position 0, on one extraction's token sample (docs/methods.md section 7, "In
practice"). A causal model's first token is the same vector in every text and carries the massive
activations (``isoscope.analysis.massive.massive``), so it can dominate both statistics."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isoscope.engine.errors import InputError


@dataclass(frozen=True)
class FirstPositionContrast:
    """Anisotropy and the largest |mean| per hidden state (S,), with and without position 0.

    Computed on the token sample of one extraction that includes the first position, on the same
    different-text pairs minus those that touch a position-0 token.
    """

    state_names: tuple[str, ...]
    anisotropy_with: np.ndarray
    anisotropy_without: np.ndarray
    max_abs_mean_with: np.ndarray
    max_abs_mean_without: np.ndarray
    n_first: int
    n_sample: int


def first_position_contrast(result, n_pairs: int | None = None, seed: int | None = None):
    """How much the first position changes the picture (docs/methods.md section 7, "In practice").

    ``result`` must include position 0 (``settings.exclude_first`` off). Anisotropy is Ethayarajh's
    mean cosine of random different-text pairs (``isoscope.analysis.anisotropy``); the largest |mean| is the
    statistic behind the Outlier page's heatmap. Raises InputError when the sample has no
    position-0 token.
    """
    from isoscope.analysis.anisotropy import (
        N_PAIRS,
        PAIR_SEED,
        different_text_pairs,
        mean_pair_cosine,
    )

    n_pairs = N_PAIRS if n_pairs is None else n_pairs
    seed = PAIR_SEED if seed is None else seed
    sample = result.sample_tokens
    first = sample.position == 0
    if not first.any():
        raise InputError(
            "the token sample has no first-position token; turn off 'exclude the first position'"
        )
    pairs = different_text_pairs(sample.text_id, n_pairs, seed)
    without = pairs[~first[pairs[:, 0]] & ~first[pairs[:, 1]]]
    vectors = result.sample_vectors  # (S, k, d)
    with_first = np.array([mean_pair_cosine(v, pairs) for v in vectors])
    without_first = np.array([mean_pair_cosine(v, without) for v in vectors])
    # one state at a time, accumulated in float64: no float64 copy of the whole (S, k, d) sample
    # (1.2 GB for 32 states of 3,000 tokens x 1,536 dims)
    mean_with = np.array([np.abs(v.mean(axis=0, dtype=np.float64)).max() for v in vectors])
    mean_without = np.array(
        [np.abs(v[~first].mean(axis=0, dtype=np.float64)).max() for v in vectors]
    )
    return FirstPositionContrast(
        tuple(result.state_names),
        with_first,
        without_first,
        mean_with,
        mean_without,
        int(first.sum()),
        len(first),
    )
