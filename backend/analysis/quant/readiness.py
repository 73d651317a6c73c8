"""Will this checkpoint quantize? Per-site activation statistics, simulated error and the measured
end-to-end loss (issue 26; METHODS.md section 10).

:func:`scan_sites` runs the model once over the corpus (sites from :mod:`.sites`, inputs recorded
with ``backend.engine.hooks.forward_hooks``) and streams, per site, over every non-padding token:

- ``act_max`` (in,): the per-channel max |x|, exactly SmoothQuant's ``act_scales``;
- max |x|, the share of values with |x| >= 6 (LLM.int8's magnitude), and the power sums of x
  (float32 within a batch, float64 across batches) that give the kurtosis, the fourth
  standardised moment ``m4 / m2²`` (not excess; a Gaussian gives 3; Bondarenko et al. 2023,
  arXiv 2306.12929);
- the inputs of a fixed, seeded token sample (``error_tokens``, default 256, the same tokens at
  every site), *stratified*: the first position of every text (where massive activations and
  spikes sit; up to half the budget) and a uniform sample of the other positions, each row
  weighted by the number of corpus tokens it stands for. The simulated errors of :mod:`.schemes`
  are the weighted ``sqrt(Σ w ||Y_q - Y||² / Σ w ||Y||²)`` over it (an estimate of the all-token
  error that a plain uniform sample would make noisy: it mostly misses the rare spike tokens),
  with the corpus-wide scales (static max, act_scales, top-K channels); the **median |x|** is the
  weighted median of the sample's values (every channel of every sampled token). Holding every
  token of every site would need tokens x sum of widths floats.

It also keeps the final state of the first texts (up to ``end_tokens`` tokens, default 256), the
full-precision reference for the end metric, and each block output's per-dim max |h| and sampled
median |h| for massive-activation dims (Sun et al. 2024: |h| > 100 and > 1000 x the median).

:func:`evaluate` quantizes every site's weights once per scheme, for the per-site error and for
the measured end-to-end loss with every site fake-quantized (pre-hooks that replace each
projection's input, and a temporary weight swap restored in ``finally``):
decoders the mean next-token KL(p_full || p_quant) over the end texts' positions (logits = final
state x the output embedding matrix), encoders the mean cosine of the full and quantized mean-pooled
final state. :func:`layer_sensitivity` quantizes one block at a time (per token), all blocks in
one batched pass: the end texts are repeated once per block along the batch and each block's
projections re-compute only their own copy's rows quantized (a forward hook), so the cost is about
one forward pass of (blocks x end tokens) tokens. The Spearman correlation between that ranking and
the blocks' mean per-site per-token error says whether the cheap proxy can be trusted here.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from backend.analysis.activations.massive import ABS_THRESHOLD, MEDIAN_RATIO
from backend.analysis.quant.schemes import (
    DEFAULT_ALPHA,
    DEFAULT_KEEP,
    SCHEME_LABELS,
    SCHEMES,
    quant_per_row,
    relative_error,
    transforms,
)
from backend.analysis.quant.sites import (
    ROLE_LABELS,
    Site,
    SiteMap,
    discover_sites,
    find_blocks,
    is_projection,
    weight_matrix,
)
from backend.engine.device import to_numpy
from backend.engine.errors import InputError, UnsupportedModelError
from backend.engine.extraction import (
    TokenizedCorpus,
    pad_batch,
    pad_token_id,
    plan_batches,
    tokenize,
)
from backend.engine.hooks import forward_hooks
from backend.engine.progress import Progress, report

if TYPE_CHECKING:
    from backend.analysis.geometry.similarity import SentencePairs

MAGNITUDE = 6.0
ERROR_TOKENS = 256
END_TOKENS = 256
TOP_CHANNELS = 8
MASSIVE_ABS = ABS_THRESHOLD  # Sun et al. 2024's rule, declared once in decoder.massive
MASSIVE_RATIO = MEDIAN_RATIO
SEED = 0


# ----------------------------------------------------------------------------- the pass


class _SiteAccumulator:
    """Streaming statistics of one site's inputs (float64 sums, float32 maxima)."""

    def __init__(self, width: int) -> None:
        self.act_max = torch.zeros(width, dtype=torch.float32)
        self.n = 0
        self.sums = torch.zeros(4, dtype=torch.float64)
        self.n_ge = 0
        self.samples: list[torch.Tensor] = []

    def update(self, rows: torch.Tensor, sample: torch.Tensor | None) -> None:
        rows = rows.float()
        if rows.numel():
            a = rows.abs()
            self.act_max = torch.maximum(self.act_max, a.amax(dim=0).cpu())
            self.n_ge += int((a >= MAGNITUDE).sum())
            x2 = rows * rows
            # float32 (pairwise) sums within a batch, float64 across batches: a float64 sum of
            # every value cost a fifth of the pass
            self.sums += (
                torch.stack([rows.sum(), x2.sum(), (x2 * rows).sum(), (x2 * x2).sum()])
                .double()
                .cpu()
            )
            self.n += rows.numel()
        if sample is not None and sample.numel():
            self.samples.append(sample.float().cpu().clone())

    def kurtosis(self) -> float:
        """``m4 / m2²`` from the raw power sums (float64; centred moments expanded)."""
        if not self.n:
            return math.nan
        e1, e2, e3, e4 = (self.sums / self.n).tolist()
        m2 = e2 - e1 * e1
        m4 = e4 - 4 * e1 * e3 + 6 * e1 * e1 * e2 - 3 * e1**4
        return m4 / (m2 * m2) if m2 > 0 else math.nan


@dataclass(eq=False)
class SiteScan:
    """One site after the pass: corpus statistics and its token sample (n, in) float32."""

    site: Site
    act_max: torch.Tensor
    max_abs: float
    median_abs: float
    kurtosis: float
    share_gt_6: float
    n_values: int
    sample: torch.Tensor

    @property
    def max_over_median(self) -> float:
        return self.max_abs / self.median_abs if self.median_abs > 0 else math.inf

    def top(self, k: int = TOP_CHANNELS) -> list[dict]:
        k = min(k, self.act_max.numel())
        values, idx = torch.topk(self.act_max, k)
        return [
            {"channel": int(j), "max_abs": float(v)}
            for v, j in zip(values.tolist(), idx.tolist(), strict=True)
        ]


@dataclass(eq=False)
class QuantScan:
    """The pass over the corpus: per-site statistics, the end texts' padded ids and reference
    final state, and massive-activation dims. Shapes: ``end_ids``/``end_mask`` (B, T),
    ``end_reference`` (B, T, d) float32."""

    site_map: SiteMap
    sites: list[SiteScan]
    n_texts: int
    n_tokens: int
    max_length: int
    error_tokens: int
    sample_weights: torch.Tensor  # (n,) float64: corpus tokens each sampled row stands for
    end_ids: torch.Tensor
    end_mask: torch.Tensor
    end_reference: torch.Tensor
    massive_dims: tuple[int, ...]
    hidden_size: int
    is_causal: bool
    seconds: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def end_tokens(self) -> int:
        return int(self.end_mask.sum())

    def act_scales(self) -> dict[str, torch.Tensor]:
        """SmoothQuant's ``act_scales``: module name -> float32 per-channel max |x|."""
        return {name: s.act_max.float().clone() for s in self.sites for name in s.site.modules}


def _select_rows(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor | None:
    """The non-padding rows of a projection input: (B, T, in) or a flattened (B*T, in)."""
    if x.dim() == 3 and tuple(x.shape[:2]) == tuple(mask.shape):
        return x[mask]
    if x.dim() == 2 and x.shape[0] == mask.numel():
        return x[mask.reshape(-1)]
    return None


def _padded(
    tokenized: TokenizedCorpus, rows: np.ndarray, pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    ids, mask = pad_batch(tokenized, rows, pad_id)  # the extraction's one padding rule
    return torch.from_numpy(ids), torch.from_numpy(mask.astype(bool))


def _sample_positions(
    lengths: np.ndarray, n: int, seed: int
) -> tuple[list[np.ndarray], float, float]:
    """Per text, the sorted positions of the stratified sample of ``n`` tokens, and the weights of
    a sampled first position and of any other sampled position (corpus tokens per sampled one)."""
    rng = np.random.default_rng(seed)
    texts = np.flatnonzero(lengths > 0)
    firsts = (
        texts
        if len(texts) <= n // 2 or len(texts) <= 1
        else rng.choice(texts, size=max(1, n // 2), replace=False)
    )
    rest_lengths = np.maximum(lengths - 1, 0)
    n_rest = int(rest_lengths.sum())
    k_rest = min(max(0, n - len(firsts)), n_rest)
    chosen = np.sort(rng.choice(n_rest, size=k_rest, replace=False)) if k_rest else np.zeros(0, int)
    starts = np.concatenate([[0], np.cumsum(rest_lengths)])
    text = np.searchsorted(starts, chosen, side="right") - 1
    first_set = set(int(t) for t in firsts)
    positions = []
    for t in range(len(lengths)):
        rest = chosen[text == t] - starts[t] + 1  # positions 1 .. len-1
        positions.append(np.concatenate([[0], rest]) if t in first_set else rest)
    w_first = len(texts) / max(1, len(firsts))
    w_rest = n_rest / k_rest if k_rest else 0.0
    return positions, float(w_first), float(w_rest)


def weighted_median(values: torch.Tensor, weights: torch.Tensor) -> float:
    """The median of ``values`` with non-negative ``weights`` (the lower one at a tie)."""
    order = torch.argsort(values)
    cum = torch.cumsum(weights[order].double(), 0)
    i = int(torch.searchsorted(cum, cum[-1] / 2))
    return float(values[order][min(i, len(values) - 1)])


def _last_state(output) -> torch.Tensor:
    state = getattr(output, "last_hidden_state", None)
    if state is None:
        state = output[0] if isinstance(output, tuple | list) else output
    return state


def _end_texts(lengths: np.ndarray, end_tokens: int) -> np.ndarray:
    """The first texts (corpus order) whose tokens fit in ``end_tokens`` (at least one)."""
    used, rows = 0, []
    for t, n in enumerate(lengths):
        if n == 0:
            continue
        if rows and used + n > end_tokens:
            break
        rows.append(t)
        used += int(n)
    return np.asarray(rows, dtype=np.int64)


def scan_sites(
    loaded,
    texts: list[str] | tuple[str, ...],
    *,
    max_length: int = 128,
    batch_size: int = 16,
    error_tokens: int = ERROR_TOKENS,
    end_tokens: int = END_TOKENS,
    seed: int = SEED,
    progress: Progress | None = None,
) -> QuantScan:
    """One pass of ``loaded.encoder`` over ``texts``: see the module docstring."""
    if error_tokens < 1 or end_tokens < 1:
        raise InputError("error_tokens and end_tokens must be at least 1")
    started = time.perf_counter()
    root = loaded.encoder
    site_map = discover_sites(loaded)
    named = dict(root.named_modules())
    tokenized = tokenize(loaded, tuple(texts), max_length)
    lengths = tokenized.lengths
    sample_pos, w_first, w_rest = _sample_positions(lengths, error_tokens, seed)
    sample_weights: list[float] = []  # in the order the sampled rows are gathered
    end_rows = _end_texts(lengths, end_tokens)
    end_slot = {int(t): k for k, t in enumerate(end_rows)}
    _, blocks = find_blocks(root, site_map.num_layers)
    accs = [_SiteAccumulator(s.width) for s in site_map.sites]
    d = int(loaded.info.hidden_size)
    block_max = torch.zeros(len(blocks), d, dtype=torch.float32)
    block_samples: list[list[torch.Tensor]] = [[] for _ in blocks]
    skipped: set[str] = set()
    state: dict[str, torch.Tensor | None] = {"mask": None, "sample": None}

    def site_hook(i: int):
        def fn(module, inputs):
            x = inputs[0]
            rows = _select_rows(x, state["mask"])
            if rows is None:
                skipped.add(site_map.sites[i].name)
                return
            sample = _select_rows(x, state["sample"])
            accs[i].update(rows, sample)

        return fn

    def block_hook(i: int):
        def fn(module, inputs, output):
            h = output[0] if isinstance(output, tuple | list) else output
            if not isinstance(h, torch.Tensor) or h.dim() != 3 or h.shape[-1] != d:
                return
            if tuple(h.shape[:2]) != tuple(state["mask"].shape):
                return
            block_max[i] = torch.maximum(block_max[i], h[state["mask"]].abs().amax(dim=0).float())
            sample = h[state["sample"]]
            if sample.numel():
                block_samples[i].append(sample.abs().float().cpu())

        return fn

    pre = {named[s.paths[0]]: site_hook(i) for i, s in enumerate(site_map.sites)}
    post = {block: block_hook(i) for i, block in enumerate(blocks)}
    batches = plan_batches(lengths, batch_size)  # the one batching rule
    pad_id = pad_token_id(loaded)
    width_end = int(lengths[end_rows].max())
    end_ids = torch.full((len(end_rows), width_end), pad_id, dtype=torch.long)
    end_mask = torch.zeros((len(end_rows), width_end), dtype=torch.bool)
    end_reference = torch.zeros((len(end_rows), width_end, d), dtype=torch.float32)
    with forward_hooks(pre, pre=True), forward_hooks(post), torch.inference_mode():
        for b, rows in enumerate(batches):
            ids, mask = _padded(tokenized, rows, pad_id)
            sample = torch.zeros_like(mask)
            for r, t in enumerate(rows):
                sample[r, sample_pos[t]] = True
                sample_weights.extend(w_first if p == 0 else w_rest for p in sample_pos[t])
            state["mask"], state["sample"] = mask.to(loaded.device), sample.to(loaded.device)
            out = root(input_ids=ids.to(loaded.device), attention_mask=mask.to(loaded.device))
            last = _last_state(out)
            for r, t in enumerate(rows):
                if int(t) in end_slot:
                    k, n = end_slot[int(t)], int(lengths[t])
                    end_ids[k, :n] = ids[r, :n]
                    end_mask[k, :n] = True
                    end_reference[k, :n] = last[r, :n].float().cpu()
            if not report(progress, b + 1, len(batches)):
                break
    n_tokens = int(lengths.sum())
    weights = torch.tensor(sample_weights, dtype=torch.float64)
    sites = []
    for site, acc in zip(site_map.sites, accs, strict=True):
        if site.name in skipped or not acc.n:
            continue
        sample = torch.cat(acc.samples) if acc.samples else torch.zeros(0, site.width)
        median = (
            weighted_median(sample.abs().flatten(), weights.repeat_interleave(site.width))
            if sample.numel()
            else math.nan
        )
        sites.append(
            SiteScan(
                site=site,
                act_max=acc.act_max,
                max_abs=float(acc.act_max.max()),
                median_abs=median,
                kurtosis=acc.kurtosis(),
                share_gt_6=acc.n_ge / acc.n,
                n_values=acc.n,
                sample=sample,
            )
        )
    massive: set[int] = set()
    for i in range(len(blocks)):
        if not block_samples[i]:
            continue
        values = torch.cat(block_samples[i])
        median = weighted_median(values.flatten(), weights.repeat_interleave(values.shape[1]))
        threshold = max(MASSIVE_ABS, MASSIVE_RATIO * median)
        massive.update(int(j) for j in torch.nonzero(block_max[i] > threshold).flatten())
    notes = list(site_map.notes)
    if skipped:
        notes.append(
            f"{len(skipped)} site(s) had inputs that are not one row per token and were left out: "
            + ", ".join(sorted(skipped)[:4])
        )
    return QuantScan(
        site_map=site_map,
        sites=sites,
        n_texts=int(sum(len(rows) for rows in batches)),  # texts with tokens
        n_tokens=n_tokens,
        max_length=int(tokenized.max_length),
        error_tokens=int(weights.numel()),
        sample_weights=weights,
        end_ids=end_ids,
        end_mask=end_mask,
        end_reference=end_reference,
        massive_dims=tuple(sorted(massive)),
        hidden_size=d,
        is_causal=bool(loaded.info.is_causal),
        seconds=time.perf_counter() - started,
        notes=tuple(notes),
    )


# ----------------------------------------------------------------------------- errors and end metric


def check_keep_alpha(keep: int, alpha: float) -> None:
    if not 0 <= int(keep) <= 4096:
        raise InputError(f"--keep must be between 0 and 4096 channels, got {keep}")
    if not 0.0 <= float(alpha) <= 1.0:
        raise InputError(f"--alpha must be between 0 and 1, got {alpha}")


def output_embeddings(loaded) -> torch.Tensor | None:
    """The (vocab, d) matrix that turns a decoder's final state into logits: the loaded model's
    output embeddings, else the input embeddings when the checkpoint ties them, else
    ``lm_head.weight`` read from the checkpoint's safetensors; None when there is none."""
    model = loaded.model
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is not None and getattr(head, "weight", None) is not None:
        return head.weight
    config = loaded.config
    text_config = getattr(config, "get_text_config", lambda: config)()
    if getattr(text_config, "tie_word_embeddings", False):
        embed = model.get_input_embeddings()
        return embed.weight if embed is not None else None
    folder = getattr(loaded, "weights_dir", None)
    if folder is not None:
        from pathlib import Path

        from safetensors import safe_open

        for path in sorted(Path(folder).glob("*.safetensors")):
            with safe_open(str(path), framework="pt") as f:
                for key in f.keys():  # noqa: SIM118 - safe_open has keys(), not __iter__
                    if key.endswith("lm_head.weight"):
                        return f.get_tensor(key).to(loaded.device)
    return None


class _Metric:
    """The end metric against the reference final state: ``kl`` (decoders with an output
    embedding) or ``cosine`` (mean-pooled final state)."""

    def __init__(self, loaded, scan: QuantScan) -> None:
        self.mask = scan.end_mask
        head = output_embeddings(loaded) if scan.is_causal else None
        self.head = None if head is None else head.detach().float().cpu()
        config = loaded.config
        text_config = getattr(config, "get_text_config", lambda: config)()
        self.softcap = getattr(text_config, "final_logit_softcapping", None)  # Gemma 2
        self.name = "kl" if self.head is not None else "cosine"
        self.ref = self._prepare(scan.end_reference)

    def _prepare(self, state: torch.Tensor):
        state = state.float().cpu()
        if self.name == "kl":
            logits = state[self.mask] @ self.head.T  # (N, vocab)
            if self.softcap:
                logits = torch.tanh(logits / self.softcap) * self.softcap
            return torch.log_softmax(logits, dim=-1)
        m = self.mask.unsqueeze(-1).float()
        return (state * m).sum(1) / m.sum(1).clamp(min=1)  # (B, d)

    def __call__(self, state: torch.Tensor) -> float:
        q = self._prepare(state)
        if self.name == "kl":
            kl = (self.ref.exp() * (self.ref - q)).sum(-1)
            return float(kl.double().mean())
        return float(F.cosine_similarity(self.ref.double(), q.double(), dim=-1).mean())

    @property
    def full_precision(self) -> float:
        return 0.0 if self.name == "kl" else 1.0


def _set_weight(module: torch.nn.Module, w_out_in: torch.Tensor) -> None:
    """Swap the weight's storage (no copy); Conv1D keeps (in, out)."""
    w = w_out_in if isinstance(module, torch.nn.Linear) else w_out_in.T.contiguous()
    module.weight.data = w.to(module.weight.dtype).to(module.weight.device)


def _run(loaded, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    out = loaded.encoder(input_ids=ids.to(loaded.device), attention_mask=mask.to(loaded.device))
    return _last_state(out)


def _shared_input_hook(x_fn):
    """A pre-hook giving ``x_fn(x)``, computed once for the projections that share ``x``."""
    cache: dict[str, torch.Tensor | None] = {"x": None, "y": None}

    def fn(module, inputs):
        x = inputs[0]
        if cache["x"] is not x:
            cache["x"], cache["y"] = x, x_fn(x.float()).to(x.dtype)
        return (cache["y"], *inputs[1:])

    return fn


def pairs_spearman(
    loaded, pairs: SentencePairs, max_length: int = 128, batch_size: int = 32
) -> float:
    """STS Spearman x 100 of the mean-pooled final state on ``pairs``, with whatever hooks and
    weights the model has now: ``isoscope sts``'s pooling and scoring (its raw score at the last
    state), so the full-precision value matches that command's."""
    from backend.analysis.geometry.similarity import pool_pairs, sts_by_state

    first, second = pool_pairs(loaded, pairs, max_length, batch_size)
    return sts_by_state(first[-1:], second[-1:], pairs.scores, [[]], state_names=("final",))[0][
        "raw"
    ]


@dataclass
class Evaluation:
    """``errors[i]``: ``{scheme: error}`` of ``scan.sites[i]``; ``end``: ``{"metric",
    "full_precision", scheme: value}`` or None; ``sensitivity``: ``[{"layer", "end"}]`` or None."""

    errors: list[dict[str, float]]
    end: dict | None
    sensitivity: list[dict] | None


def evaluate(
    loaded,
    scan: QuantScan,
    *,
    keep: int = DEFAULT_KEEP,
    alpha: float = DEFAULT_ALPHA,
    end: bool = True,
    sensitivity: bool = True,
    schemes: tuple[str, ...] = SCHEMES,
    pairs: SentencePairs | None = None,
    batch_size: int = 32,
    progress: Progress | None = None,
) -> Evaluation:
    """Per scheme: quantize every site's weights once, use them for the per-site error on the
    token sample and (``end``) for one forward pass of the end texts with every site
    fake-quantized (pre-hooks replace each projection's input; weights swapped for the pass and
    restored in ``finally``). ``sensitivity`` then measures every block alone (per token).

    ``pairs`` (encoders, with ``end``): also the STS Spearman x 100 of the mean-pooled final state
    in full precision and under each scheme (:func:`pairs_spearman`), in ``end["sts_spearman"]``,
    with ``end["sts_spearman_change"]`` (scheme minus full precision)."""
    check_keep_alpha(keep, alpha)
    if pairs is not None and scan.is_causal:
        raise InputError(
            "STS pairs score an encoder's mean-pooled sentence vectors; this is a decoder, whose "
            "end metric is the next-token KL: leave the pairs out"
        )
    root = loaded.encoder
    named = dict(root.named_modules())
    metric = _Metric(loaded, scan) if end or sensitivity else None
    errors: list[dict[str, float]] = [{} for _ in scan.sites]
    reference: list[torch.Tensor] = []
    end_out = (
        None
        if metric is None or not end
        else {
            "metric": metric.name,
            "full_precision": metric.full_precision,
        }
    )
    per_token_weights: dict[torch.nn.Module, torch.Tensor] = {}
    steps = len(schemes) + (1 if sensitivity else 0)
    sts = None
    if pairs is not None and end_out is not None:
        sts = {"full_precision": pairs_spearman(loaded, pairs, scan.max_length, batch_size)}
    with torch.inference_mode():
        for k, scheme in enumerate(schemes):
            originals: dict[torch.nn.Module, torch.Tensor] = {}
            pre = {}
            try:
                for i, s in enumerate(scan.sites):
                    modules = [named[p] for p in s.site.paths]
                    w = torch.cat([weight_matrix(m).detach().float() for m in modules])
                    x = s.sample.to(w.device)
                    if len(reference) <= i:
                        reference.append(x @ w.T)
                    x_fn, w_q = transforms(
                        scheme, w, s.act_max.to(w.device), keep=keep, alpha=alpha
                    )
                    x_q = x if x_fn is None else x_fn(x)
                    errors[i][scheme] = relative_error(
                        x_q @ w_q.T, reference[i], scan.sample_weights
                    )
                    start = 0
                    for m in modules:
                        rows = weight_matrix(m).shape[0]
                        if scheme == "per_token" and sensitivity:
                            per_token_weights[m] = w_q[start : start + rows]
                        if end:
                            originals[m] = m.weight.data
                            _set_weight(m, w_q[start : start + rows])
                        start += rows
                    if end and x_fn is not None:
                        pre.update(dict.fromkeys(modules, _shared_input_hook(x_fn)))
                if end:
                    with forward_hooks(pre, pre=True):
                        state = _run(loaded, scan.end_ids, scan.end_mask).float().cpu()
                        if sts is not None:
                            sts[scheme] = pairs_spearman(loaded, pairs, scan.max_length, batch_size)
                    end_out[scheme] = metric(state)
            finally:
                for m, w in originals.items():
                    m.weight.data = w
            report(progress, k + 1, steps)
    if sts is not None:
        end_out["sts_spearman"] = sts
        end_out["sts_spearman_change"] = {
            k: v - sts["full_precision"] for k, v in sts.items() if k != "full_precision"
        }
        end_out["sts_pairs"] = {"name": pairs.name, "count": len(pairs), "sha": pairs.sha}
    sens = None
    if sensitivity:
        if not per_token_weights:  # per_token was not among the schemes
            for s in scan.sites:
                for p in s.site.paths:
                    w = weight_matrix(named[p]).detach().float()
                    per_token_weights[named[p]] = quant_per_row(w)
        sens = layer_sensitivity(loaded, scan, per_token_weights, metric)
        report(progress, steps, steps)
    return Evaluation(errors, end_out, sens)


def layer_sensitivity(
    loaded,
    scan: QuantScan,
    weights: dict[torch.nn.Module, torch.Tensor],
    metric: _Metric,
    *,
    max_batch_tokens: int = 8192,
) -> list[dict]:
    """``[{"layer", "end"}]``: the end metric with only that block's sites quantized per token
    (W8A8; ``weights`` the per-channel int8 weights of every projection, (out, in)). The end texts
    are repeated once per block along the batch; a forward hook on every projection replaces the
    rows of its own block's copy with ``q(x) q(W)ᵀ + b``, so every block is measured in one (or a
    few) batched passes while the model's weights stay untouched."""
    root = loaded.encoder
    named = dict(root.named_modules())
    layer_of = {named[p]: s.site.layer for s in scan.sites for p in s.site.paths}
    layers = sorted(set(layer_of.values()))
    b, width = scan.end_ids.shape
    per_pass = max(1, max_batch_tokens // max(1, b * width))
    results: dict[int, float] = {}
    for start in range(0, len(layers), per_pass):
        chunk = layers[start : start + per_pass]
        slot = {layer: g for g, layer in enumerate(chunk)}

        def hook(module, inputs, output, slot=slot):
            g = slot.get(layer_of[module])
            if g is None:
                return None
            x = inputs[0][g * b : (g + 1) * b]
            bias = getattr(module, "bias", None)
            y = F.linear(quant_per_row(x.float()), weights[module].to(x.device), None)
            if bias is not None:
                y = y + bias.float()
            output[g * b : (g + 1) * b] = y.to(output.dtype)
            return output

        ids = scan.end_ids.repeat(len(chunk), 1)
        mask = scan.end_mask.repeat(len(chunk), 1)
        with forward_hooks(dict.fromkeys(layer_of, hook)), torch.inference_mode():
            state = _run(loaded, ids, mask).float().cpu()
        for layer, g in slot.items():
            results[layer] = metric(state[g * b : (g + 1) * b])
    return [{"layer": layer, "end": results[layer]} for layer in layers]


def quantized_state(
    loaded,
    scan: QuantScan,
    scheme: str,
    *,
    keep: int = DEFAULT_KEEP,
    alpha: float = DEFAULT_ALPHA,
) -> float:
    """The end metric of one scheme alone (every site quantized); see :func:`evaluate`."""
    ev = evaluate(loaded, scan, keep=keep, alpha=alpha, schemes=(scheme,), sensitivity=False)
    return ev.end[scheme]


def spearman(a: list[float], b: list[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None when undefined."""
    if len(a) < 3:
        return None
    from scipy.stats import spearmanr

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if not (np.isfinite(x).all() and np.isfinite(y).all()) or x.std() == 0 or y.std() == 0:
        return None
    return float(spearmanr(x, y).statistic)


# ----------------------------------------------------------------------------- the report


@dataclass(eq=False)
class QuantReport:
    """Everything the CLI writes and the page draws. ``errors[i]`` belongs to ``scan.sites[i]``;
    ``end`` and ``sensitivity`` may be None when not measured."""

    scan: QuantScan
    errors: list[dict[str, float]]
    end: dict | None
    sensitivity: list[dict] | None
    keep: int
    alpha: float
    outlier_dims: dict[int, tuple[int, ...]] | None = None

    @property
    def metric(self) -> str | None:
        return None if self.end is None else self.end["metric"]

    def with_outlier_dims(self, result, by_state: list[list[int]] | None = None) -> QuantReport:
        """This report with the hidden-state outlier dims of the extraction ``result`` (see
        :func:`outlier_dims_by_state`), so :meth:`site_rows` fills ``outlier_overlap``: the one
        way the page, the CLI and the report attach them."""
        return replace(self, outlier_dims=outlier_dims_by_state(result, by_state))

    def layer_error(self, scheme: str = "per_token") -> dict[int, float]:
        """Per block, the mean per-site error of ``scheme`` (the cheap proxy)."""
        by_layer: dict[int, list[float]] = {}
        for s, e in zip(self.scan.sites, self.errors, strict=True):
            by_layer.setdefault(s.site.layer, []).append(e[scheme])
        return {layer: float(np.mean(v)) for layer, v in sorted(by_layer.items())}

    def spearman_error_vs_end(self) -> float | None:
        if not self.sensitivity:
            return None
        proxy = self.layer_error("per_token")
        layers = [r["layer"] for r in self.sensitivity]
        # badness: KL grows with damage, cosine falls with it
        sign = 1.0 if self.metric == "kl" else -1.0
        return spearman([proxy[i] for i in layers], [sign * r["end"] for r in self.sensitivity])

    def site_rows(self) -> list[dict]:
        rows = []
        d = self.scan.hidden_size
        massive = set(self.scan.massive_dims)
        for s, e in zip(self.scan.sites, self.errors, strict=True):
            top = s.top()
            channels = [t["channel"] for t in top]
            residual = s.site.width == d  # channels are hidden dims only at width d
            outliers = (self.outlier_dims or {}).get(s.site.layer)
            rows.append(
                {
                    "modules": list(s.site.modules),
                    "layer": s.site.layer,
                    "role": s.site.role,
                    "width": s.site.width,
                    "max_abs": s.max_abs,
                    "median_abs": s.median_abs,
                    "max_over_median": s.max_over_median,
                    "kurtosis": s.kurtosis,
                    "share_gt_6": s.share_gt_6,
                    "top_channels": top,
                    "outlier_overlap": (
                        [c for c in channels if c in set(outliers)]
                        if residual and outliers is not None
                        else None
                    ),
                    "massive_overlap": [c for c in channels if c in massive] if residual else None,
                    "error": dict(e),
                }
            )
        return rows

    def loss_share(self, top: int = 2) -> tuple[list[int], float]:
        """The ``top`` most sensitive blocks and their share of the summed per-block loss."""
        if not self.sensitivity:
            return [], 0.0
        damage = np.array(
            [r["end"] if self.metric == "kl" else 1.0 - r["end"] for r in self.sensitivity]
        )
        damage = np.clip(damage, 0, None)
        if damage.sum() <= 0:
            return [], 0.0
        order = np.argsort(-damage)[:top]
        return [self.sensitivity[i]["layer"] for i in order], float(
            damage[order].sum() / damage.sum()
        )

    def verdict(self) -> str:
        """One or two sentences written from the numbers."""
        if self.end is None:
            worst = max(range(len(self.errors)), key=lambda i: self.errors[i]["per_token"])
            s = self.scan.sites[worst]
            return (
                f"The hardest site for per-token W8A8 is {s.site.modules[0]} "
                f"(relative error {self.errors[worst]['per_token']:.3f})."
            )
        end, name = self.end, self.metric
        fmt = (lambda v: f"KL {v:.3g}") if name == "kl" else (lambda v: f"1 − cosine {1 - v:.3g}")
        best = min(
            (k for k in SCHEMES if k in end),
            key=lambda k: end[k] if name == "kl" else -end[k],
        )
        parts = [
            f"Per-token W8A8 costs {fmt(end['per_token'])} (static per-tensor "
            f"{fmt(end['per_tensor'])}); keeping {self.keep} channels brings it to "
            f"{fmt(end['keep_k'])}, SmoothQuant (α = {self.alpha:g}) to {fmt(end['smoothquant'])}, "
            f"a Hadamard rotation to {fmt(end['rotation'])}; weight-only int4 costs "
            f"{fmt(end['w4_g128'])}. Best: {SCHEME_LABELS.get(best, best)}."
        ]
        layers, share = self.loss_share()
        if layers:
            names = " and ".join(str(i) for i in layers)
            parts.append(f"Blocks {names} account for {share:.0%} of the per-block loss")
            rho = self.spearman_error_vs_end()
            if rho is not None:
                trust = "can" if rho >= 0.6 else "cannot"
                parts[-1] += (
                    f"; the per-site error ranks the blocks with Spearman {rho:.2f} against the "
                    f"measured loss, so the cheap proxy {trust} be trusted on this model."
                )
            else:
                parts[-1] += "."
        sts = end.get("sts_spearman")
        if sts:
            change = end["sts_spearman_change"]
            worst = min(change, key=change.get)
            parts.append(
                f"STS Spearman × 100 on {end['sts_pairs']['count']:,} pairs: "
                f"{sts['full_precision']:.1f} in full precision, {sts['per_token']:.1f} per token "
                f"({change['per_token']:+.1f}); the largest drop is "
                f"{SCHEME_LABELS.get(worst, worst)} ({change[worst]:+.1f})."
            )
        return " ".join(parts)

    def to_dict(self, model: dict | None = None, corpus: dict | None = None) -> dict:
        """The CLI's JSON (issue 26's keys, plus a few documented extras)."""
        return {
            "model": model or {},
            "corpus": {
                **(corpus or {}),
                "texts": self.scan.n_texts,
                "tokens": self.scan.n_tokens,
                "max_length": self.scan.max_length,
                "error_tokens": self.scan.error_tokens,
                "end_texts": int(self.scan.end_ids.shape[0]),
                "end_tokens": self.scan.end_tokens,
            },
            "settings": {"keep": self.keep, "alpha": self.alpha},
            "sites": self.site_rows(),
            "end": self.end,
            "sensitivity": self.sensitivity,
            "spearman_error_vs_end": self.spearman_error_vs_end(),
            "massive_dims": list(self.scan.massive_dims),
            "verdict": self.verdict(),
            "notes": list(self.scan.notes),
        }


def analyse(
    loaded,
    texts: list[str] | tuple[str, ...],
    *,
    max_length: int = 128,
    batch_size: int = 16,
    keep: int = DEFAULT_KEEP,
    alpha: float = DEFAULT_ALPHA,
    error_tokens: int = ERROR_TOKENS,
    end_tokens: int = END_TOKENS,
    end: bool = True,
    sensitivity: bool = True,
    outlier_dims: dict[int, tuple[int, ...]] | None = None,
    pairs: SentencePairs | None = None,
    progress: Progress | None = None,
) -> QuantReport:
    """The whole analysis: :func:`scan_sites` then :func:`evaluate` (``pairs``: the encoder's STS
    change per scheme). ``progress`` gets one unit per batch of the pass, per scheme and one for
    the sensitivity runs."""
    check_keep_alpha(keep, alpha)
    n_batches = math.ceil(len(texts) / max(1, batch_size))
    n_eval = len(SCHEMES) + (1 if sensitivity else 0)
    total = n_batches + n_eval

    def stage(offset: int):
        return lambda done, of: report(progress, offset + done, total)

    scan = scan_sites(
        loaded,
        texts,
        max_length=max_length,
        batch_size=batch_size,
        error_tokens=error_tokens,
        end_tokens=end_tokens,
        progress=stage(0),
    )
    return report_from(
        loaded,
        scan,
        keep=keep,
        alpha=alpha,
        end=end,
        sensitivity=sensitivity,
        outlier_dims=outlier_dims,
        pairs=pairs,
        batch_size=batch_size,
        progress=stage(n_batches),
    )


def report_from(
    loaded,
    scan: QuantScan,
    *,
    keep: int = DEFAULT_KEEP,
    alpha: float = DEFAULT_ALPHA,
    end: bool = True,
    sensitivity: bool = True,
    outlier_dims: dict[int, tuple[int, ...]] | None = None,
    pairs: SentencePairs | None = None,
    batch_size: int = 32,
    progress: Progress | None = None,
) -> QuantReport:
    """:func:`evaluate` a finished scan (the page re-evaluates one scan for new K and α)."""
    ev = evaluate(
        loaded,
        scan,
        keep=keep,
        alpha=alpha,
        end=end,
        sensitivity=sensitivity,
        pairs=pairs,
        batch_size=batch_size,
        progress=progress,
    )
    return QuantReport(
        scan, ev.errors, ev.end, ev.sensitivity, int(keep), float(alpha), outlier_dims
    )


def role_label(role: str) -> str:
    return ROLE_LABELS.get(role, role)


def outlier_dims_by_state(
    result, by_state: list[list[int]] | None = None
) -> dict[int, tuple[int, ...]]:
    """Hidden-state outlier dims (``backend.analysis.geometry.outliers.outlier_dims_by_state``,
    the headline rule) per block index: block ``i`` reads the hidden state ``i`` (0 = the
    embeddings). ``by_state``: that function's answer for ``result``, when already computed."""
    from backend.analysis.geometry.outliers import outlier_dims_by_state as headline_by_state

    dims = by_state if by_state is not None else headline_by_state(result)
    return {i: tuple(int(j) for j in dims[i]) for i in range(result.num_states - 1)}


__all__ = [
    "QuantReport",
    "QuantScan",
    "analyse",
    "report_from",
    "evaluate",
    "is_projection",
    "layer_sensitivity",
    "scan_sites",
]


# ----------------------------------------------------------------------------- token x channel view


@dataclass(frozen=True)
class MagnitudeTiles:
    """|x| of one site for every non-padding token (corpus order) x every input channel,
    max-pooled into tiles so thousands of tokens fit a figure: ``tiles`` float32 (rows, cols),
    each tile the max |x| over ``tokens_per_row`` consecutive tokens and ``channels_per_col``
    consecutive channels (the issue SmoothQuant users hit: a full matrix runs plotting libraries
    out of memory; max pooling keeps every spike visible)."""

    site: str
    tiles: np.ndarray
    tokens_per_row: int
    channels_per_col: int
    n_tokens: int
    width: int


class _Stop(Exception):
    """Raised inside the hook once the site's input is recorded: the rest of the pass is skipped."""


def site_magnitudes(
    loaded,
    texts: list[str] | tuple[str, ...],
    site: Site,
    *,
    max_length: int = 128,
    batch_size: int = 16,
    max_rows: int = 400,
    max_cols: int = 600,
    progress: Progress | None = None,
) -> MagnitudeTiles:
    """Stream one site's |x| over the corpus into max-pooled tiles (see :class:`MagnitudeTiles`);
    each batch's forward pass stops at the site (blocks after it never run)."""
    tokenized = tokenize(loaded, tuple(texts), max_length)
    lengths = tokenized.lengths
    n_tokens = int(lengths.sum())
    tpr = max(1, math.ceil(n_tokens / max_rows))
    cpc = max(1, math.ceil(site.width / max_cols))
    n_rows, n_cols = math.ceil(n_tokens / tpr), math.ceil(site.width / cpc)
    tiles = torch.zeros(n_rows, n_cols, dtype=torch.float32)
    module = dict(loaded.encoder.named_modules())[site.paths[0]]
    rows_all = np.flatnonzero(lengths > 0)
    batches = [rows_all[i : i + batch_size] for i in range(0, len(rows_all), batch_size)]
    state: dict = {"mask": None, "offset": 0}

    def hook(mod, inputs):
        rows = _select_rows(inputs[0], state["mask"])
        if rows is None:
            raise UnsupportedModelError(f"the input of {site.name} is not one row per token")
        a = rows.abs().float().cpu()  # (n, width), texts in corpus order
        pad = n_cols * cpc - site.width
        if pad:
            a = F.pad(a, (0, pad))
        a = a.reshape(a.shape[0], n_cols, cpc).amax(-1)  # (n, cols)
        index = (torch.arange(a.shape[0]) + state["offset"]) // tpr
        tiles.scatter_reduce_(0, index[:, None].expand_as(a), a, "amax")
        state["offset"] += a.shape[0]
        raise _Stop

    pad_id = pad_token_id(loaded)
    with forward_hooks({module: hook}, pre=True), torch.inference_mode():
        for b, rows in enumerate(batches):
            ids, mask = _padded(tokenized, rows, pad_id)
            state["mask"] = mask.to(loaded.device)
            try:
                _run(loaded, ids, mask)
            except _Stop:
                pass
            if not report(progress, b + 1, len(batches)):
                break
    return MagnitudeTiles(site.name, to_numpy(tiles), tpr, cpc, n_tokens, site.width)
