"""The pass over the corpus (docs/methods.md section 10).

:func:`scan_sites` runs the model once over the corpus (sites from :mod:`..sites`, inputs recorded
with ``isoscope.engine.arch.hooks.forward_hooks``) and streams, per site, over every non-padding token:

- ``act_max`` (in,): the per-channel max |x|, exactly SmoothQuant's ``act_scales``;
- max |x|, the share of values with |x| >= 6 (LLM.int8's magnitude), and the power sums of x
  (float32 within a batch, float64 across batches) that give the kurtosis, the fourth
  standardised moment ``m4 / m2²`` (not excess; a Gaussian gives 3; Bondarenko et al. 2023,
  arXiv 2306.12929);
- the inputs of a fixed, seeded token sample (``error_tokens``, default 256, the same tokens at
  every site), *stratified*: the first position of every text (where massive activations and
  spikes sit; up to half the budget) and a uniform sample of the other positions, each row
  weighted by the number of corpus tokens it stands for. The simulated errors of :mod:`..schemes`
  are the weighted ``sqrt(Σ w ||Y_q - Y||² / Σ w ||Y||²)`` over it (an estimate of the all-token
  error that a plain uniform sample would make noisy: it mostly misses the rare spike tokens),
  with the corpus-wide scales (static max, act_scales, top-K channels); the **median |x|** is the
  weighted median of the sample's values (every channel of every sampled token). Holding every
  token of every site would need tokens x sum of widths floats.

It also keeps the final state of the first texts (up to ``end_tokens`` tokens, default 256; on a
causal model spread over at least :data:`MIN_END_TEXTS` texts, each cut to its share), the
full-precision reference for the end metric, and each block output's per-dim max |h| and sampled
median |h| for massive-activation dims (Sun et al. 2024: |h| > 100 and > 1000 x the median).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from isoscope.analysis.quant.params import (
    END_TOKENS,
    ERROR_TOKENS,
    QUANT_BATCH_SIZE,
    QUANT_MAX_LENGTH,
)
from isoscope.analysis.quant.sites import Site, SiteMap, discover_sites, find_blocks
from isoscope.engine.arch.hooks import forward_hooks
from isoscope.engine.budget.batching import plan_batches
from isoscope.engine.budget.progress import Progress, report
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import TokenizedCorpus, pad_batch, pad_token_id, tokenize
from isoscope.engine.params import LLM_INT8_THRESHOLD, MASSIVE_ABS_THRESHOLD, MASSIVE_MEDIAN_RATIO

MIN_END_TEXTS = (
    8  # texts the end metric spreads over on a causal model (the bootstrap is over texts)
)
TOP_CHANNELS = 8
SEED = 0


class SiteAccumulator:
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
            self.n_ge += int((a >= LLM_INT8_THRESHOLD).sum())
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


def select_rows(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor | None:
    """The non-padding rows of a projection input: (B, T, in), a flattened (B*T, in), or one
    with extra axes of size one around the tokens ((B, 1, T, in): a latent attention's
    up-projection fed one latent "head")."""
    if x.dim() == 3 and tuple(x.shape[:2]) == tuple(mask.shape):
        return x[mask]
    if x.dim() == 2 and x.shape[0] == mask.numel():
        return x[mask.reshape(-1)]
    lead = [n for n in x.shape[:-1] if n != 1]
    if x.dim() > 3 and lead == [n for n in mask.shape if n != 1]:
        return x.reshape(*mask.shape, x.shape[-1])[mask]
    return None


def padded(
    tokenized: TokenizedCorpus, rows: np.ndarray, pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    ids, mask = pad_batch(tokenized, rows, pad_id)  # the extraction's one padding rule
    return torch.from_numpy(ids), torch.from_numpy(mask.astype(bool))


def sample_positions(
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


def last_state(output) -> torch.Tensor:
    state = getattr(output, "last_hidden_state", None)
    if state is None:
        state = output[0] if isinstance(output, tuple | list) else output
    return state


def _end_texts(
    lengths: np.ndarray, end_tokens: int, causal: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The end texts (corpus order) and the tokens kept of each: the first texts whose tokens fit
    in ``end_tokens`` (at least one). For a causal model, when that is fewer than
    :data:`MIN_END_TEXTS` texts, the first :data:`MIN_END_TEXTS` texts cut to an equal share of
    ``end_tokens`` instead: a causal model's states on a prefix are its states on the whole text,
    and the bootstrap over texts needs texts (2 texts of 128 tokens give no interval worth the
    name). A bidirectional model keeps whole texts, whose states a cut would change."""
    used = 0
    rows: list[int] = []
    for t, n in enumerate(lengths):
        if n == 0:
            continue
        if rows and used + n > end_tokens:
            break
        rows.append(t)
        used += int(n)
    keep = np.asarray([int(lengths[t]) for t in rows], dtype=np.int64)
    nonempty = np.flatnonzero(lengths > 0)
    if causal and len(rows) < MIN_END_TEXTS and len(nonempty) > len(rows):
        chosen = nonempty[:MIN_END_TEXTS]
        share = max(2, end_tokens // len(chosen))
        return chosen.astype(np.int64), np.minimum(lengths[chosen], share).astype(np.int64)
    return np.asarray(rows, dtype=np.int64), keep


class _Recorder:
    """The pass's hooks and what they collect: per site a :class:`SiteAccumulator` (its
    pre-hook on the site's first projection), per block its output's per-dim max |h| and the
    sampled |h| (a forward hook), for the batch whose ``mask`` / ``sample`` are set."""

    def __init__(self, site_map: SiteMap, blocks: list | torch.nn.ModuleList, d: int) -> None:
        self.site_map, self.d = site_map, d
        self.accs = [SiteAccumulator(s.width) for s in site_map.sites]
        self.block_max = torch.zeros(len(blocks), d, dtype=torch.float32)
        self.block_samples: list[list[torch.Tensor]] = [[] for _ in blocks]
        self.skipped: set[str] = set()
        self.mask: torch.Tensor | None = None
        self.sample: torch.Tensor | None = None
        self.calls: dict[torch.nn.Module, int] = {}  # calls of each hooked module in the batch

    def site_hook(self, sites: list[int]):
        """The pre-hook of a module that is the first projection of ``sites``: its k-th call
        in a batch is the input of ``sites[k]`` (Gemma 3n's AltUp router runs twice per block,
        once per site); calls past those are not a site's."""

        def fn(module, inputs):
            k = self.calls.get(module, 0)
            self.calls[module] = k + 1
            if k >= len(sites):
                return
            i = sites[k]
            x = inputs[0]
            rows = select_rows(x, self.mask)
            if rows is None:
                self.skipped.add(self.site_map.sites[i].name)
                return
            self.accs[i].update(rows, select_rows(x, self.sample))

        return fn

    def block_hook(self, i: int):
        def fn(module, inputs, output):
            h = output[0] if isinstance(output, tuple | list) else output
            if not isinstance(h, torch.Tensor) or h.dim() != 3 or h.shape[-1] != self.d:
                return
            if tuple(h.shape[:2]) != tuple(self.mask.shape):
                return
            self.block_max[i] = torch.maximum(
                self.block_max[i], h[self.mask].abs().amax(dim=0).float()
            )
            sample = h[self.sample]
            if sample.numel():
                self.block_samples[i].append(sample.abs().float().cpu())

        return fn

    def site_scans(self, weights: torch.Tensor) -> list[SiteScan]:
        """Every site that saw one row per token, with its statistics (``weights``: the
        sampled rows' corpus tokens, for the weighted median)."""
        sites = []
        for site, acc in zip(self.site_map.sites, self.accs, strict=True):
            if site.name in self.skipped or not acc.n:
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
        return sites

    def massive_dims(self, weights: torch.Tensor) -> tuple[int, ...]:
        """Dims with a massive activation in some block's output (Sun et al. 2024's rule)."""
        massive: set[int] = set()
        for i, samples in enumerate(self.block_samples):
            if not samples:
                continue
            values = torch.cat(samples)
            median = weighted_median(values.flatten(), weights.repeat_interleave(values.shape[1]))
            threshold = max(MASSIVE_ABS_THRESHOLD, MASSIVE_MEDIAN_RATIO * median)
            massive.update(int(j) for j in torch.nonzero(self.block_max[i] > threshold).flatten())
        return tuple(sorted(massive))


class _EndTexts:
    """The end texts' padded ids, mask and full-precision final state (B, T[, d]), filled from
    the pass's batches as their texts go by."""

    def __init__(
        self, lengths: np.ndarray, end_tokens: int, pad_id: int, d: int, causal: bool
    ) -> None:
        rows, keep = _end_texts(lengths, end_tokens, causal)
        self.slot = {int(t): k for k, t in enumerate(rows)}
        self.keep = keep
        width = int(keep.max())
        self.ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        self.mask = torch.zeros((len(rows), width), dtype=torch.bool)
        self.reference = torch.zeros((len(rows), width, d), dtype=torch.float32)

    def fill(self, rows: np.ndarray, ids: torch.Tensor, last: torch.Tensor) -> None:
        for r, t in enumerate(rows):
            if int(t) in self.slot:
                k = self.slot[int(t)]
                n = int(self.keep[k])
                self.ids[k, :n] = ids[r, :n]
                self.mask[k, :n] = True
                self.reference[k, :n] = last[r, :n].float().cpu()


def scan_sites(
    loaded,
    texts: list[str] | tuple[str, ...],
    *,
    max_length: int = QUANT_MAX_LENGTH.default,
    batch_size: int = QUANT_BATCH_SIZE.default,
    error_tokens: int = ERROR_TOKENS.default,
    end_tokens: int = END_TOKENS.default,
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
    sample_pos, w_first, w_rest = sample_positions(lengths, error_tokens, seed)
    sample_weights: list[float] = []  # in the order the sampled rows are gathered
    _, blocks = find_blocks(root, site_map.num_layers)
    d = int(loaded.info.hidden_size)
    recorder = _Recorder(site_map, blocks, d)
    first: dict[torch.nn.Module, list[int]] = {}
    for i, site in enumerate(site_map.sites):
        first.setdefault(named[site.paths[0]], []).append(i)
    pre = {module: recorder.site_hook(sites) for module, sites in first.items()}
    post = {block: recorder.block_hook(i) for i, block in enumerate(blocks)}
    batches = plan_batches(lengths, batch_size, group=tokenized.group)  # the one batching rule
    pad_id = pad_token_id(loaded)
    end = _EndTexts(lengths, end_tokens, pad_id, d, bool(loaded.info.is_causal))
    with forward_hooks(pre, pre=True), forward_hooks(post), torch.inference_mode():
        for b, rows in enumerate(batches):
            ids, mask = padded(tokenized, rows, pad_id)
            sample = torch.zeros_like(mask)
            for r, t in enumerate(rows):
                sample[r, sample_pos[t]] = True
                sample_weights.extend(w_first if p == 0 else w_rest for p in sample_pos[t])
            recorder.mask, recorder.sample = mask.to(loaded.device), sample.to(loaded.device)
            recorder.calls.clear()
            out = root(input_ids=ids.to(loaded.device), attention_mask=mask.to(loaded.device))
            end.fill(rows, ids, last_state(out))
            if not report(progress, b + 1, len(batches)):
                break
    weights = torch.tensor(sample_weights, dtype=torch.float64)
    notes = list(site_map.notes)
    if recorder.skipped:
        notes.append(
            f"{len(recorder.skipped)} site(s) had inputs that are not one row per token and were "
            "left out: " + ", ".join(sorted(recorder.skipped)[:4])
        )
    return QuantScan(
        site_map=site_map,
        sites=recorder.site_scans(weights),
        n_texts=int(sum(len(rows) for rows in batches)),  # texts with tokens
        n_tokens=int(lengths.sum()),
        max_length=int(tokenized.max_length),
        error_tokens=int(weights.numel()),
        sample_weights=weights,
        end_ids=end.ids,
        end_mask=end.mask,
        end_reference=end.reference,
        massive_dims=recorder.massive_dims(weights),
        hidden_size=d,
        is_causal=bool(loaded.info.is_causal),
        seconds=time.perf_counter() - started,
        notes=tuple(notes),
    )
