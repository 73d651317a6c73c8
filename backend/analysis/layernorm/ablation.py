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

from __future__ import annotations

import copy
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch

from backend.analysis.geometry.isotropy import (
    N_PAIRS,
    cosine_rows,
    different_text_pairs,
    mean_pair_cosine,
)
from backend.analysis.geometry.postprocess import parse_dims as parse_typed_dims
from backend.analysis.geometry.similarity import spearman100
from backend.analysis.layernorm.params import NormSite, find_norms, norms_of, select_norms
from backend.engine.device import to_numpy
from backend.engine.errors import InputError
from backend.engine.extraction import TokenizedCorpus, pad_token_id, tokenize
from backend.engine.hooks import forward_hooks
from backend.engine.models import LoadedModel, _resolve_folder
from backend.engine.naming import hidden_state_names
from backend.engine.pooling import masked_mean

Progress = Callable[[int, int], "bool | None"]
MASK_RATE = 0.15


# ----------------------------------------------------------------------------- the primitive


def parse_dims(text: str | Sequence[int], width: int) -> list[int]:
    """``"127, 223"`` or ``[127, 223]`` -> sorted unique ints in [0, width); at least one."""
    dims = parse_typed_dims(text, width)
    if not dims:
        raise InputError(
            f"no dimensions to ablate; type integers between 0 and {width - 1} separated by commas"
        )
    return dims


def _sites_for(
    model_or_loaded: torch.nn.Module | LoadedModel, norms
) -> tuple[torch.nn.Module, list[NormSite], int]:
    model = getattr(model_or_loaded, "model", model_or_loaded)
    width = int(model.config.hidden_size)
    if (
        norms is not None
        and not isinstance(norms, str)
        and len(norms)
        and isinstance(norms[0], NormSite)
    ):
        return model, list(norms), width
    sites = norms_of(model_or_loaded) if hasattr(model_or_loaded, "info") else find_norms(model)
    return model, select_norms(sites, norms), width


@contextmanager
def ablated(
    model_or_loaded: torch.nn.Module | LoadedModel, dims: Sequence[int], norms=None
) -> Iterator[list[NormSite]]:
    """Set gamma_j = beta_j = 0 for ``dims`` in ``norms`` (names/roles, NormSites, or None for the
    output LN of every layer; the MLM head LN only when named, e.g. ``["out", "head"]``).

    The original parameters are restored exactly in ``finally``, even if the body raises.
    Yields the NormSites that were changed.
    """
    model, sites, width = _sites_for(model_or_loaded, norms)
    dims = parse_dims(list(dims), width)
    index = torch.as_tensor(dims, dtype=torch.long)
    saved = []
    try:
        with torch.no_grad():
            for site in sites:
                weight = site.module.weight
                bias = site.module.bias if site.has_bias else None
                saved.append(
                    (
                        weight,
                        weight.detach().clone(),
                        bias,
                        None if bias is None else bias.detach().clone(),
                    )
                )
                weight[index.to(weight.device)] = -site.gamma_offset  # effective gamma 0
                if bias is not None:
                    bias[index.to(bias.device)] = 0
        yield sites
    finally:
        with torch.no_grad():
            for weight, weight_copy, bias, bias_copy in saved:
                weight.copy_(weight_copy)
                if bias is not None:
                    bias.copy_(bias_copy)


@contextmanager
def masked_norms(sites: list[NormSite], mask: torch.Tensor) -> Iterator[None]:
    """Multiply every norm output by ``mask`` ((batch, 1, d) of 0/1) via forward hooks; batch row
    r carries its own ablation. Equivalent to zeroing gamma_j, beta_j where ``mask[r, 0, j] == 0``."""
    with forward_hooks({s.module: lambda _m, _i, out: out * mask.to(out.dtype) for s in sites}):
        yield


def has_mlm_checkpoint(source: str) -> bool:
    """True when the checkpoint's config names a masked-LM architecture, so ``head="mlm"`` loads
    trained head weights (AutoModelForMaskedLM on a base checkpoint would invent a random head)."""
    if source.lower().startswith(("random:", "random-like:")):
        return False
    try:
        folder, _ = _resolve_folder(source)
        archs = json.loads((folder / "config.json").read_text()).get("architectures") or []
    except Exception:
        return False
    return any(a.endswith("ForMaskedLM") or a == "BertForPreTraining" for a in archs)


def private_copy(loaded: LoadedModel):
    """A deep copy of ``loaded`` whose model can be modified without touching the cached one."""
    return dataclasses.replace(loaded, model=copy.deepcopy(loaded.model))


def random_control_dims(
    width: int, exclude: Sequence[int], size: int, seed: int, index: int
) -> list[int]:
    """``size`` random dims not in ``exclude`` (control ``index`` of ``seed``; reproducible)."""
    pool = np.setdiff1d(np.arange(width), np.asarray(list(exclude), dtype=np.int64))
    if size > len(pool):
        raise InputError(
            f"cannot draw {size} random control dims from the {len(pool)} dims not ablated; ablate fewer dims"
        )
    rng = np.random.default_rng([int(seed), int(index)])
    return sorted(int(j) for j in rng.choice(pool, size=size, replace=False))


# ----------------------------------------------------------------------------- MLM masking


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


def _mask_token_id(loaded: LoadedModel) -> int:
    token_id = getattr(loaded.tokenizer, "mask_token_id", None)
    if token_id is None:
        raise InputError(
            "the tokenizer has no mask token; the MLM loss needs a masked-LM tokenizer"
        )
    return int(token_id)


# ----------------------------------------------------------------------------- batching


def _batches(lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    order = np.argsort(-lengths, kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def _pad(
    rows: list[np.ndarray], pad_id: int, fill: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = np.full((len(rows), width), pad_id if fill is None else fill, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = 1
    return torch.from_numpy(ids), torch.from_numpy(mask)


def _hidden(loaded: LoadedModel, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    out = loaded.encoder(
        input_ids=ids.to(loaded.device),
        attention_mask=mask.to(loaded.device),
        output_hidden_states=True,
    )
    return torch.stack(out.hidden_states).to("cpu", torch.float64)  # (S, B, T, d)


def _mlm_loss_sum(
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


def _cos(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """Cosine along the last axis (backend.analysis.geometry.isotropy.cosine_rows); zero vectors give 0."""
    return cosine_rows(to_numpy(a), to_numpy(b))


# ----------------------------------------------------------------------------- effects


@dataclass(frozen=True)
class Effect:
    """What one ablation did. Arrays are per hidden state (S,), index 0 = ``emb``.

    ``embedding_cosine``: mean over texts of cos(original, ablated) mean-pooled embedding;
    ``token_cosine``: mean over tokens of cos(original, ablated) token vector;
    ``anisotropy``: mean cosine of random different-text token pairs after ablation;
    ``sts_spearman``: Spearman x 100 of pair cosines vs gold scores after ablation (None without pairs);
    ``mlm_loss``: mean masked-token cross-entropy (None without an MLM head).
    """

    embedding_cosine: np.ndarray
    token_cosine: np.ndarray
    anisotropy: np.ndarray
    sts_spearman: np.ndarray | None = None
    mlm_loss: float | None = None

    def to_dict(self) -> dict:
        return {
            "embedding_cosine": self.embedding_cosine.tolist(),
            "token_cosine": self.token_cosine.tolist(),
            "anisotropy": self.anisotropy.tolist(),
            "sts_spearman": None if self.sts_spearman is None else self.sts_spearman.tolist(),
            "mlm_loss": self.mlm_loss,
        }


@dataclass(frozen=True)
class AblationReport:
    """Effects of ablating ``dims`` in ``norms`` and of each random control (same size)."""

    dims: list[int]
    norms: list[str]
    state_names: list[str]
    effect: Effect
    controls: list[tuple[list[int], Effect]]
    anisotropy_original: np.ndarray
    sts_spearman_original: np.ndarray | None
    mlm_loss_original: float | None
    num_texts: int
    num_masked: int
    seed: int
    seconds: float
    notices: list[str] = field(default_factory=list)

    def control_values(self, key: str) -> np.ndarray:
        """(n_controls, S) for array keys, (n_controls,) for ``mlm_loss``."""
        return np.array([getattr(e, key) for _, e in self.controls], dtype=np.float64)

    def control_summary(self) -> dict:
        """Mean and standard deviation over the random controls, per key."""
        out = {}
        for key in ("embedding_cosine", "token_cosine", "anisotropy", "sts_spearman", "mlm_loss"):
            if getattr(self.effect, key) is None or not self.controls:
                out[key] = None
                continue
            values = self.control_values(key)
            out[key] = {
                "mean": values.mean(axis=0).tolist(),
                "std": values.std(axis=0).tolist(),
                "min": values.min(axis=0).tolist(),
                "max": values.max(axis=0).tolist(),
            }
        return out

    def effect_json(self, effect: Effect) -> dict:
        data = effect.to_dict()
        data["mlm_loss_original"] = self.mlm_loss_original
        data["anisotropy_original"] = self.anisotropy_original.tolist()
        data["anisotropy_change"] = (effect.anisotropy - self.anisotropy_original).tolist()
        if effect.sts_spearman is not None and self.sts_spearman_original is not None:
            data["sts_spearman_original"] = self.sts_spearman_original.tolist()
            data["sts_spearman_change"] = (
                effect.sts_spearman - self.sts_spearman_original
            ).tolist()
        return data

    def to_json(self) -> dict:
        """The ``ablate`` JSON body (without ``ln_outliers``, which the caller adds)."""
        return {
            "dims": self.dims,
            "norms": self.norms,
            "state_names": self.state_names,
            "effect": self.effect_json(self.effect),
            "random_controls": [
                {"dims": d, "effect": self.effect_json(e)} for d, e in self.controls
            ],
            "control_summary": self.control_summary(),
            "num_texts": self.num_texts,
            "num_masked_tokens": self.num_masked,
            "seed": self.seed,
            "seconds": self.seconds,
            "notices": self.notices,
        }

    def frame(self):
        """Long table: condition, kind (ablation / random control), dims, state, metric, value."""
        import pandas as pd  # lazy: a slow import that only the table views need

        rows = []
        for label, kind, dims, eff in [("ablation", "ablation", self.dims, self.effect)] + [
            (f"control {i + 1}", "random control", d, e) for i, (d, e) in enumerate(self.controls)
        ]:
            for key in ("embedding_cosine", "token_cosine", "anisotropy", "sts_spearman"):
                values = getattr(eff, key)
                if values is None:
                    continue
                for s, name in enumerate(self.state_names):
                    rows.append(
                        {
                            "condition": label,
                            "kind": kind,
                            "dims": " ".join(map(str, dims)),
                            "state": name,
                            "metric": key,
                            "value": float(values[s]),
                        }
                    )
            if eff.mlm_loss is not None:
                rows.append(
                    {
                        "condition": label,
                        "kind": kind,
                        "dims": " ".join(map(str, dims)),
                        "state": "",
                        "metric": "mlm_loss",
                        "value": eff.mlm_loss,
                    }
                )
        return pd.DataFrame(rows)


def _spearman(pair_cos: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Spearman x 100 of pair cosines vs gold per hidden state (as backend.analysis.geometry.similarity reports STS)."""
    return np.array([spearman100(row, gold) for row in pair_cos], dtype=np.float64)


def _pair_cosines(pooled: torch.Tensor, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    return _cos(pooled[:, left], pooled[:, right])  # (S, n_pairs)


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
) -> list[dict]:
    """Run every condition (None = original) batch by batch; returns per condition the sums of
    sentence-embedding and token cosines vs the original, the anisotropy sample, MLM loss sums and,
    with ``keep_pooled``, the pooled vectors (S, n, d) (only for the small pair corpus: memory)."""
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
        {
            "pooled": torch.zeros(S, n, d, dtype=torch.float64) if keep_pooled else None,
            "emb_cos": np.zeros(S),
            "tok_cos": np.zeros(S),
            "tokens": 0,
            "sample": None if sample is None else np.zeros((S, len(sample), d), dtype=np.float32),
            "loss": 0.0,
        }
        for _ in conditions
    ]
    pad_id = pad_token_id(target)
    with torch.inference_mode():
        for batch in _batches(lengths, batch_size):
            ids, mask = _pad([tokenized.input_ids[t] for t in batch], pad_id)
            keep = mask.bool()
            if masked is not None:
                mids, _ = _pad([masked.input_ids[t] for t in batch], pad_id)
                labels, _ = _pad([masked.labels[t] for t in batch], pad_id, fill=-100)
            rows = np.concatenate([offsets[t] + np.arange(lengths[t]) for t in batch])
            original = pooled_original = None
            for c, dims in enumerate(conditions):
                if dims is None:
                    hidden = _hidden(target, ids, mask)
                    loss = (
                        _mlm_loss_sum(target, mids, mask, labels).sum()
                        if masked is not None
                        else 0.0
                    )
                else:
                    with ablated(target, dims, sites):
                        hidden = _hidden(target, ids, mask)
                        loss = (
                            _mlm_loss_sum(target, mids, mask, labels).sum()
                            if masked is not None
                            else 0.0
                        )
                pooled = masked_mean(hidden, mask)  # (S, B, d)
                if original is None:
                    original, pooled_original = hidden, pooled
                record = out[c]
                if keep_pooled:
                    record["pooled"][:, torch.as_tensor(batch)] = pooled
                record["emb_cos"] += _cos(pooled, pooled_original).sum(axis=1)
                record["tok_cos"] += _cos(hidden[:, keep], original[:, keep]).sum(axis=1)
                record["tokens"] += int(keep.sum())
                record["loss"] += float(loss)
                if slot is not None:
                    slots = slot[rows]
                    hit = slots >= 0
                    if hit.any():
                        record["sample"][:, slots[hit]] = to_numpy(
                            hidden[:, keep][:, torch.from_numpy(hit)]
                        )
                tick()
    return out


def run_ablation(
    loaded: LoadedModel,
    texts: Sequence[str],
    dims: Sequence[int],
    *,
    norms=None,
    random_controls: int = 5,
    seed: int = 0,
    max_length: int = 128,
    batch_size: int = 32,
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
    """
    started = time.perf_counter()
    texts = list(texts)
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
    notices = []
    tokenized = tokenize(target, tuple(texts), max_length)
    total_tokens = int(tokenized.lengths.sum())
    rng = np.random.default_rng(seed)
    sample = np.sort(
        rng.choice(total_tokens, size=min(anisotropy_tokens, total_tokens), replace=False)
    )
    text_of_token = np.repeat(np.arange(len(texts)), tokenized.lengths)[sample]
    masked = None
    if mlm and target.info.has_mlm_head:
        masked = mask_tokens(tokenized, _mask_token_id(target), MASK_RATE, seed)
    elif mlm:
        notices.append(
            "no MLM head: masked-token loss not computed (load a *ForMaskedLM checkpoint for it)"
        )
    pair_tok = None
    if pairs is not None:
        left, right, gold = (list(x) for x in pairs)
        if not (len(left) == len(right) == len(gold)) or len(left) < 3:
            raise InputError("sentence pairs need equal-length columns and at least 3 pairs")
        unique = sorted(set(left) | set(right))
        where = {s: i for i, s in enumerate(unique)}
        pair_tok = tokenize(target, tuple(unique), max_length)
        left_i = np.array([where[s] for s in left])
        right_i = np.array([where[s] for s in right])
        gold = np.asarray(gold, dtype=np.float64)

    n_batches = len(_batches(tokenized.lengths, batch_size))
    if pair_tok is not None:
        n_batches += len(_batches(pair_tok.lengths, batch_size))
    total = n_batches * len(conditions)
    done = [0]

    def tick() -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], total)

    runs = _collect(target, tokenized, sites, conditions, batch_size, sample, masked, tick)
    pair_runs = None
    if pair_tok is not None:
        pair_runs = _collect(
            target, pair_tok, sites, conditions, batch_size, None, None, tick, keep_pooled=True
        )

    aniso_pairs = different_text_pairs(text_of_token, N_PAIRS, seed)

    def aniso(vectors: np.ndarray) -> np.ndarray:
        return np.array([mean_pair_cosine(v, aniso_pairs) for v in vectors])

    original = runs[0]
    num_masked = masked.num_masked if masked is not None else 0
    sts_original = None
    if pair_runs is not None:
        sts_original = _spearman(_pair_cosines(pair_runs[0]["pooled"], left_i, right_i), gold)

    def effect(c: int) -> Effect:
        run = runs[c]
        sts = None
        if pair_runs is not None:
            sts = _spearman(_pair_cosines(pair_runs[c]["pooled"], left_i, right_i), gold)
        return Effect(
            embedding_cosine=run["emb_cos"] / len(texts),
            token_cosine=run["tok_cos"] / max(run["tokens"], 1),
            anisotropy=aniso(run["sample"]),
            sts_spearman=sts,
            mlm_loss=run["loss"] / num_masked if masked is not None and num_masked else None,
        )

    return AblationReport(
        dims=dims,
        norms=[s.name for s in sites],
        state_names=hidden_state_names(target.info.num_layers),
        effect=effect(1),
        controls=[(controls[i], effect(i + 2)) for i in range(len(controls))],
        anisotropy_original=aniso(original["sample"]),
        sts_spearman_original=sts_original,
        mlm_loss_original=original["loss"] / num_masked
        if masked is not None and num_masked
        else None,
        num_texts=len(texts),
        num_masked=num_masked,
        seed=seed,
        seconds=time.perf_counter() - started,
        notices=notices,
    )


# ----------------------------------------------------------------------------- one-at-a-time sweep


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
    tokenized = tokenize(target, tuple(texts), max_length)
    pad_id = pad_token_id(target)
    ids, mask = _pad(tokenized.input_ids, pad_id)
    B = ids.shape[0]
    keep = mask.bool()
    use_mlm = mlm and target.info.has_mlm_head
    if use_mlm:
        masked = mask_tokens(tokenized, _mask_token_id(target), MASK_RATE, seed)
        mids, _ = _pad(masked.input_ids, pad_id)
        labels, _ = _pad(masked.labels, pad_id, fill=-100)
        n_masked = max(masked.num_masked, 1)
    S = target.info.num_layers + 1
    emb_cos = np.full((len(all_dims), S), np.nan)
    tok_cos = np.full((len(all_dims), S), np.nan)
    losses = np.full(len(all_dims), np.nan) if use_mlm else None
    step = copies if method == "batched" else 1
    chunks = [all_dims[i : i + step] for i in range(0, len(all_dims), step)]
    done_dims = 0
    complete = True
    with torch.inference_mode():
        original = _hidden(target, ids, mask)
        pooled_original = masked_mean(original, mask)  # (S, B, d)
        loss_original = (
            float(_mlm_loss_sum(target, mids, mask, labels).sum()) / n_masked if use_mlm else None
        )
        for chunk in chunks:
            if stop is not None and stop.is_set():
                complete = False
                break
            m = len(chunk)
            if method == "batched":
                dim_mask = torch.ones(m * B, 1, width, dtype=torch.float32, device=target.device)
                for c, j in enumerate(chunk):
                    dim_mask[c * B : (c + 1) * B, 0, j] = 0
                with masked_norms(sites, dim_mask):
                    hidden = _hidden(target, ids.repeat(m, 1), mask.repeat(m, 1))
                if use_mlm:
                    # logits are (rows, T, vocab): a few copies at a time keeps them under ~256 MB
                    vocab = int(target.model.config.vocab_size)
                    per_pass = max(1, min(m, (256 << 20) // max(1, B * ids.shape[1] * vocab * 4)))
                    parts = []
                    for a in range(0, m, per_pass):
                        sub = dim_mask[a * B : min(m, a + per_pass) * B]
                        k = sub.shape[0] // B
                        with masked_norms(sites, sub):
                            parts.append(
                                _mlm_loss_sum(
                                    target,
                                    mids.repeat(k, 1),
                                    mask.repeat(k, 1),
                                    labels.repeat(k, 1),
                                )
                            )
                    per_row = torch.cat(parts)
            else:
                with ablated(target, chunk, sites):
                    hidden = _hidden(target, ids, mask)
                    if use_mlm:
                        per_row = _mlm_loss_sum(target, mids, mask, labels)
            hidden = hidden.reshape(S, m, B, *hidden.shape[2:])  # (S, m, B, T, d)
            for c in range(m):
                h = hidden[:, c]
                row = done_dims + c
                emb_cos[row] = _cos(masked_mean(h, mask), pooled_original).mean(axis=1)
                tok_cos[row] = _cos(h[:, keep], original[:, keep]).mean(axis=1)
                if use_mlm:
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
