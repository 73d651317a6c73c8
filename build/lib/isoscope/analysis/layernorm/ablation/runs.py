"""One ablation against random controls of the same size (:func:`run_ablation`): every condition
run batch by batch on the same texts and masks."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from isoscope.analysis.anisotropy import N_PAIRS, different_text_pairs, mean_pair_cosine
from isoscope.analysis.layernorm.ablation.effects import AblationReport, Effect
from isoscope.analysis.layernorm.ablation.forward import (
    ablation_batches,
    cosines,
    hidden_states_cpu,
    media_hidden_states_cpu,
    padded,
)
from isoscope.analysis.layernorm.ablation.masking import (
    MASK_RATE,
    MaskedCorpus,
    mask_token_id,
    mask_tokens,
    mlm_loss_sum,
)
from isoscope.analysis.layernorm.ablation.surgery import (
    ablated,
    parse_dims,
    private_copy,
    random_control_dims,
)
from isoscope.analysis.layernorm.params import NormSite, norms_of, select_norms
from isoscope.analysis.layernorm.thresholds import RANDOM_CONTROLS
from isoscope.analysis.similarity import spearman100
from isoscope.engine.budget.progress import Progress, counter
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import TokenizedCorpus, pad_token_id, tokenize
from isoscope.engine.extraction.media import MediaTokens, is_media, prepare_media
from isoscope.engine.extraction.pooling import masked_mean
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.naming import hidden_state_names
from isoscope.engine.params import BATCH_SIZE, MAX_LENGTH


@dataclass(frozen=True)
class _PairSet:
    """STS pairs as indices into their distinct sentences, tokenized once."""

    tokenized: TokenizedCorpus
    left: np.ndarray
    right: np.ndarray
    gold: np.ndarray  # float64 (n_pairs,)

    @classmethod
    def of(
        cls,
        target: LoadedModel,
        pairs: tuple[Sequence[str], Sequence[str], Sequence[float]],
        max_length: int,
    ) -> _PairSet:
        left, right, gold = list(pairs[0]), list(pairs[1]), list(pairs[2])
        if not (len(left) == len(right) == len(gold)) or len(left) < 3:
            raise InputError("sentence pairs need equal-length columns and at least 3 pairs")
        unique = sorted(set(left) | set(right))
        where = {s: i for i, s in enumerate(unique)}
        return cls(
            tokenize(target, tuple(unique), max_length),
            np.array([where[s] for s in left]),
            np.array([where[s] for s in right]),
            np.asarray(gold, dtype=np.float64),
        )

    def spearman(self, run: _Run) -> np.ndarray:
        """Spearman x 100 of one run's pair cosines vs gold per hidden state (as
        isoscope.analysis.similarity reports STS)."""
        pooled = run.pooled
        assert pooled is not None  # the pair runs keep their pooled vectors
        pair_cos = cosines(pooled[:, self.left], pooled[:, self.right])  # (S, n_pairs)
        return np.array([spearman100(row, self.gold) for row in pair_cos], dtype=np.float64)


@dataclass
class _Run:
    """What one condition accumulates over the batches: sums of the sentence-embedding and token
    cosines vs the original per state (S,), the analysed token count, the MLM loss sum, the
    anisotropy sample (S, m, d) and, when kept, the pooled vectors (S, n, d)."""

    emb_cos: np.ndarray
    tok_cos: np.ndarray
    sample: np.ndarray | None
    pooled: torch.Tensor | None
    tokens: int = 0
    loss: float = 0.0


def _hidden_and_loss(
    target: LoadedModel,
    dims: list[int] | None,
    sites: list[NormSite],
    hidden_of: Callable[[], torch.Tensor],
    loss_of: Callable[[], float],
) -> tuple[torch.Tensor, float]:
    """One batch's hidden states and MLM loss sum, with ``dims`` ablated (None: the original)."""
    if dims is None:
        return hidden_of(), loss_of()
    with ablated(target, dims, sites):
        return hidden_of(), loss_of()


def _no_loss() -> float:
    return 0.0


def _mlm_loss(target: LoadedModel, ids, mask, labels) -> float:
    return float(mlm_loss_sum(target, ids, mask, labels).sum())


def _collect(
    target: LoadedModel,
    tokenized: TokenizedCorpus,
    sites: list[NormSite],
    conditions: list[list[int] | None],
    batch_size: int,
    sample: np.ndarray | None,
    masked: MaskedCorpus | None,
    tick: Callable[[], None],
    keep_pooled: bool = False,
) -> list[_Run]:
    """Run every condition (None = original) batch by batch; returns one :class:`_Run` per
    condition (pooled vectors only with ``keep_pooled``: the small pair corpus, for memory)."""
    n = len(tokenized.input_ids)
    S = target.info.num_layers + 1
    d = target.info.hidden_size
    lengths = tokenized.lengths
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    slot = None
    if sample is not None:
        slot = np.full(int(offsets[-1]), -1, dtype=np.int64)
        slot[sample] = np.arange(len(sample))
    out = [
        _Run(
            emb_cos=np.zeros(S),
            tok_cos=np.zeros(S),
            sample=None if sample is None else np.zeros((S, len(sample), d), dtype=np.float32),
            pooled=torch.zeros(S, n, d, dtype=torch.float64) if keep_pooled else None,
        )
        for _ in conditions
    ]
    media = isinstance(tokenized, MediaTokens)
    pad_id = 0 if media else pad_token_id(target)

    def forward(ids, mask, batch) -> torch.Tensor:
        if isinstance(tokenized, MediaTokens):  # media
            return media_hidden_states_cpu(target, tokenized, batch)
        return hidden_states_cpu(target, ids, mask)

    with torch.inference_mode():
        for batch in ablation_batches(tokenized, batch_size):
            ids, mask = padded([tokenized.input_ids[t] for t in batch], pad_id)
            keep = mask.bool()
            loss_of: Callable[[], float] = _no_loss
            if masked is not None:
                mids, _ = padded([masked.input_ids[t] for t in batch], pad_id)
                labels, _ = padded([masked.labels[t] for t in batch], -100)
                loss_of = functools.partial(_mlm_loss, target, mids, mask, labels)
            hidden_of = functools.partial(forward, ids, mask, batch)
            rows = np.concatenate([offsets[t] + np.arange(lengths[t]) for t in batch])
            slots = slot[rows] if slot is not None else None
            original = pooled_original = None
            for record, dims in zip(out, conditions, strict=True):
                hidden, loss = _hidden_and_loss(target, dims, sites, hidden_of, loss_of)
                pooled = masked_mean(hidden, mask)  # (S, B, d)
                if original is None or pooled_original is None:  # set together, by the first
                    original, pooled_original = hidden, pooled
                if record.pooled is not None:
                    record.pooled[:, torch.as_tensor(batch)] = pooled
                record.emb_cos += cosines(pooled, pooled_original).sum(axis=1)
                record.tok_cos += cosines(hidden[:, keep], original[:, keep]).sum(axis=1)
                record.tokens += int(keep.sum())
                record.loss += float(loss)
                if slots is not None and (slots >= 0).any():
                    hit = slots >= 0
                    assert record.sample is not None  # slots come with the sample
                    record.sample[:, slots[hit]] = to_numpy(
                        hidden[:, keep][:, torch.from_numpy(hit)]
                    )
                tick()
    return out


def _anisotropy_sample(
    tokenized: TokenizedCorpus, n_texts: int, size: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(token rows, their texts)``: a seeded sorted sample of at most ``size`` token rows for
    the anisotropy estimate."""
    total_tokens = int(tokenized.lengths.sum())
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(total_tokens, size=min(size, total_tokens), replace=False))
    return sample, np.repeat(np.arange(n_texts), tokenized.lengths)[sample]


def _mlm_masks(
    target: LoadedModel, tokenized: TokenizedCorpus, wanted: bool, seed: int, notices: list[str]
) -> MaskedCorpus | None:
    """The masked copy of the corpus for the MLM loss, when wanted and the model has a head (a
    notice says so when it has none)."""
    if wanted and target.info.has_mlm_head:
        return mask_tokens(tokenized, mask_token_id(target), MASK_RATE, seed)
    if wanted:
        notices.append(
            "no MLM head: masked-token loss not computed (load a *ForMaskedLM checkpoint for it)"
        )
    return None


def run_ablation(
    loaded: LoadedModel,
    items: Sequence,  # texts, or images or clips (MediaItem)
    dims: Sequence[int],
    *,
    norms=None,
    random_controls: int = RANDOM_CONTROLS.default,
    seed: int = 0,
    max_length: int = MAX_LENGTH.default,
    batch_size: int = BATCH_SIZE.default,
    pairs: tuple[Sequence[str], Sequence[str], Sequence[float]] | None = None,
    mlm: bool = True,
    anisotropy_tokens: int = 1000,
    progress: Progress | None = None,
    in_place: bool = False,
) -> AblationReport:
    """Ablate ``dims`` (see :func:`ablated`) and ``random_controls`` random sets of the same size.

    ``pairs`` = (sentences A, sentences B, gold scores) adds STS Spearman per hidden state.
    ``mlm`` computes the masked-token loss when the model has an MLM head. ``in_place=True`` skips
    the private copy (for a process that owns the model, like the CLI).

    ``items`` are texts, or images or clips (:class:`isoscope.engine.inputs.media.MediaItem`): for media no LM loss
    and no sentence pair, so the end metric is the final-state cosine (``embedding_cosine`` at the
    last state: the mean cosine between the unablated and ablated mean-pooled final state).
    """
    started = time.perf_counter()
    items = list(items)
    media = is_media(items)
    if media and pairs is not None:
        raise InputError(
            "STS pairs are sentences, and this ablation runs on images or audio clips; leave them "
            "out (the end metric is the final-state cosine)"
        )
    width = loaded.info.hidden_size
    dims = parse_dims(list(dims), width)
    if random_controls < 0 or random_controls > 100:
        raise InputError(f"random controls must be between 0 and 100, got {random_controls}")
    target = loaded if in_place else private_copy(loaded)
    sites = select_norms(norms_of(target), norms)
    controls = [
        random_control_dims(width, dims, len(dims), seed, i) for i in range(random_controls)
    ]
    conditions: list[list[int] | None] = [None, dims, *controls]
    notices: list[str] = []
    tokenized: TokenizedCorpus
    if media:
        tokenized = prepare_media(target, items)
    else:
        tokenized = tokenize(target, tuple(items), max_length)
    sample, text_of_token = _anisotropy_sample(tokenized, len(items), anisotropy_tokens, seed)
    masked = _mlm_masks(target, tokenized, mlm and not media, seed, notices)
    pair_set = _PairSet.of(target, pairs, max_length) if pairs is not None else None

    n_batches = len(ablation_batches(tokenized, batch_size))
    if pair_set is not None:
        n_batches += len(ablation_batches(pair_set.tokenized, batch_size))
    tick = counter(progress, n_batches * len(conditions))
    runs = _collect(target, tokenized, sites, conditions, batch_size, sample, masked, tick)
    pair_runs = None
    if pair_set is not None:
        pair_runs = _collect(
            target, pair_set.tokenized, sites, conditions, batch_size, None, None, tick, True
        )

    aniso_pairs = different_text_pairs(text_of_token, N_PAIRS, seed)

    def aniso(vectors: np.ndarray | None) -> np.ndarray:
        assert vectors is not None  # the corpus runs keep their anisotropy sample
        return np.array([mean_pair_cosine(v, aniso_pairs) for v in vectors])

    original = runs[0]
    num_masked = masked.num_masked if masked is not None else 0
    sts_original = None
    if pair_set is not None and pair_runs is not None:  # set together
        sts_original = pair_set.spearman(pair_runs[0])

    def effect(c: int) -> Effect:
        run = runs[c]
        sts = None
        if pair_set is not None and pair_runs is not None:
            sts = pair_set.spearman(pair_runs[c])
        return Effect(
            embedding_cosine=run.emb_cos / len(items),
            token_cosine=run.tok_cos / max(run.tokens, 1),
            anisotropy=aniso(run.sample),
            sts_spearman=sts,
            mlm_loss=run.loss / num_masked if masked is not None and num_masked else None,
        )

    return AblationReport(
        dims=dims,
        norms=[s.name for s in sites],
        state_names=hidden_state_names(target.info.num_layers),
        effect=effect(1),
        controls=[(controls[i], effect(i + 2)) for i in range(len(controls))],
        anisotropy_original=aniso(original.sample),
        sts_spearman_original=sts_original,
        mlm_loss_original=original.loss / num_masked if masked is not None and num_masked else None,
        num_texts=len(items),
        num_masked=num_masked,
        modality=target.layout.modality,
        seed=seed,
        seconds=time.perf_counter() - started,
        notices=notices,
    )
