"""Simulated error per site and the measured end-to-end loss (docs/methods.md section 10).

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

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
import torch.nn.functional as F

from isoscope.analysis.quant.params import ALPHA_GRID, KEEP_K, SMOOTHQUANT_ALPHA, check_keep_alpha
from isoscope.analysis.quant.readiness.scan import QuantScan, last_state
from isoscope.analysis.quant.schemes import SCHEMES, quant_per_row, relative_error, transforms
from isoscope.analysis.quant.sites import weight_matrix
from isoscope.engine.arch.hooks import forward_hooks
from isoscope.engine.budget.progress import Progress, report
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError

if TYPE_CHECKING:
    from isoscope.engine.inputs.pairs import SentencePairs


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
            logits = state[self.mask] @ cast(torch.Tensor, self.head).T  # (N, vocab); kl: a head
            if self.softcap:
                logits = torch.tanh(logits / self.softcap) * self.softcap
            return torch.log_softmax(logits, dim=-1)
        m = self.mask.unsqueeze(-1).float()
        return (state * m).sum(1) / m.sum(1).clamp(min=1)  # (B, d)

    def per_text(self, state: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """Per end text, the metric's sum over its positions (KL) or its cosine, and how many
        values each stands for: the parts a bootstrap over texts resamples."""
        q = self._prepare(state)
        if self.name == "kl":
            kl = (self.ref.exp() * (self.ref - q)).sum(-1).double()  # (N,) positions in mask order
            text = torch.nonzero(self.mask)[:, 0]
            sums = torch.zeros(self.mask.shape[0], dtype=torch.float64).index_add_(0, text, kl)
            return to_numpy(sums), to_numpy(self.mask.sum(1))
        cos = F.cosine_similarity(self.ref.double(), q.double(), dim=-1)
        return to_numpy(cos), np.ones(cos.shape[0])

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
    weight = cast(torch.Tensor, module.weight)
    weight.data = w.to(weight.dtype).to(weight.device)


def run_model(loaded, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    out = loaded.encoder(input_ids=ids.to(loaded.device), attention_mask=mask.to(loaded.device))
    return last_state(out)


def _shared_input_hook(x_fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[..., tuple]:
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
    from isoscope.analysis.similarity import pool_pairs, sts_by_state

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
    interval: dict | None = None  # {scheme: [low, high]}: :func:`bootstrap_intervals`


BOOTSTRAP = 1000
LEVEL = 0.95


def bootstrap_intervals(
    parts: dict[str, tuple[np.ndarray, np.ndarray]],
    *,
    resamples: int = BOOTSTRAP,
    level: float = LEVEL,
    seed: int = 0,
) -> dict[str, list[float]]:
    """Percentile bootstrap over texts (Efron & Tibshirani 1993) of each scheme's end metric:
    ``parts[scheme]`` the per-text sums and counts (:meth:`_Metric.per_text`); every resample
    draws texts with replacement, the same texts for every scheme (paired), and recomputes the
    token-weighted mean. With one text there is nothing to resample: the interval is the value."""
    if not parts:
        return {}
    n = len(next(iter(parts.values()))[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    tail = (1.0 - level) / 2
    out = {}
    for scheme, (sums, counts) in parts.items():
        means = sums[idx].sum(1) / np.maximum(counts[idx].sum(1), 1e-12)
        out[scheme] = [float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))]
    return out


def evaluate(
    loaded,
    scan: QuantScan,
    *,
    keep: int = KEEP_K.default,
    alpha: float = SMOOTHQUANT_ALPHA.default,
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
    named = dict(loaded.encoder.named_modules())
    metric = _Metric(loaded, scan) if end or sensitivity else None
    end = end and metric is not None
    errors: list[dict[str, float]] = [{} for _ in scan.sites]
    end_out: dict[str, Any] | None = (
        {"metric": metric.name, "full_precision": metric.full_precision}
        if end and metric is not None
        else None
    )
    per_token_weights: dict[torch.nn.Module, torch.Tensor] = {}
    parts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    steps = len(schemes) + (1 if sensitivity else 0)
    sts: dict[str, float] | None = None
    if pairs is not None and end:
        sts = {"full_precision": pairs_spearman(loaded, pairs, scan.max_length, batch_size)}
    references = _site_references(named, scan)
    with torch.inference_mode():
        for k, scheme in enumerate(schemes):
            originals: dict[torch.nn.Module, torch.Tensor] = {}
            try:
                pre = _quantize_sites(
                    named, scan, scheme, references, errors, originals if end else None,
                    keep=keep, alpha=alpha,
                    keep_weights=per_token_weights if scheme == "per_token" and sensitivity else None,
                )  # fmt: skip
                if end:
                    with forward_hooks(pre, pre=True):
                        state = run_model(loaded, scan.end_ids, scan.end_mask).float().cpu()
                        if sts is not None and pairs is not None:
                            sts[scheme] = pairs_spearman(loaded, pairs, scan.max_length, batch_size)
                    # one logits pass gives both the figure and its bootstrap parts
                    assert metric is not None and end_out is not None  # made for end
                    sums, counts = parts[scheme] = metric.per_text(state)
                    end_out[scheme] = float(sums.sum() / counts.sum())
            finally:
                for m, w in originals.items():
                    m.weight.data = w
            report(progress, k + 1, steps)
    if sts is not None and end_out is not None and pairs is not None:  # all three with end
        _attach_sts(end_out, sts, pairs)
    sens = None
    if sensitivity:
        if not per_token_weights:  # per_token was not among the schemes
            per_token_weights = {
                named[p]: quant_per_row(weight_matrix(named[p]).detach().float())
                for s in scan.sites
                for p in s.site.paths
            }
        assert metric is not None  # made for sensitivity
        sens = layer_sensitivity(loaded, scan, per_token_weights, metric)
        report(progress, steps, steps)
    return Evaluation(errors, end_out, sens, bootstrap_intervals(parts) if parts else None)


def _site_weight(named: dict, site_scan) -> tuple[list[torch.nn.Module], torch.Tensor]:
    """The site's projections and their stacked weight (out, in) float32."""
    modules = [named[p] for p in site_scan.site.paths]
    return modules, torch.cat([weight_matrix(m).detach().float() for m in modules])


def _site_references(named: dict, scan: QuantScan) -> list[torch.Tensor]:
    """Per site, the full-precision ``Y = x Wᵀ`` of its token sample."""
    out = []
    with torch.inference_mode():
        for s in scan.sites:
            _, w = _site_weight(named, s)
            out.append(s.sample.to(w.device) @ w.T)
    return out


def _quantize_sites(
    named: dict,
    scan: QuantScan,
    scheme: str,
    references: list[torch.Tensor],
    errors: list[dict[str, float]],
    originals: dict[torch.nn.Module, torch.Tensor] | None,
    *,
    keep: int,
    alpha: float,
    keep_weights: dict[torch.nn.Module, torch.Tensor] | None = None,
) -> dict:
    """One scheme at every site: its per-site error into ``errors[i][scheme]``; with
    ``originals``, the quantized weights swapped in (originals remembered for the caller's
    ``finally``) and the input pre-hooks returned; ``keep_weights`` collects each projection's
    quantized weight (the sensitivity's per-token weights)."""
    pre = {}
    for i, s in enumerate(scan.sites):
        modules, w = _site_weight(named, s)
        x = s.sample.to(w.device)
        x_fn, w_q = transforms(scheme, w, s.act_max.to(w.device), keep=keep, alpha=alpha)
        x_q = x if x_fn is None else x_fn(x)
        errors[i][scheme] = relative_error(x_q @ w_q.T, references[i], scan.sample_weights)
        if keep_weights is not None:
            keep_weights.update(_split_rows(modules, w_q))
        if originals is not None:
            _swap_weights(modules, w_q, originals)
            if x_fn is not None:
                pre.update(dict.fromkeys(modules, _shared_input_hook(x_fn)))
    return pre


def _attach_sts(end_out: dict, sts: dict, pairs: SentencePairs) -> None:
    end_out["sts_spearman"] = sts
    end_out["sts_spearman_change"] = {
        k: v - sts["full_precision"] for k, v in sts.items() if k != "full_precision"
    }
    end_out["sts_pairs"] = {"name": pairs.name, "count": len(pairs), "sha": pairs.sha}


def alpha_sweep(
    loaded, scan: QuantScan, grid: tuple[float, ...] = ALPHA_GRID
) -> list[dict[str, float]]:
    """``[{"alpha", "error"}]``, by α: SmoothQuant's mean per-site error (the weighted relative
    output error of :func:`evaluate`, on the same token sample and act_scales) at the α of
    ``grid`` that :func:`descend` visits, so α is chosen on the one scan without an end pass per
    α (Xiao et al. 2023 pick α per model on a calibration set the same way). Each α costs a
    quantized pass over every site's sample (seconds on SmolLM2), so the grid is walked downhill
    from the paper's 0.5 rather than evaluated whole."""
    for a in grid:
        check_keep_alpha(KEEP_K.default, a)
    named = dict(loaded.encoder.named_modules())
    references = _site_references(named, scan)

    def error(a: float) -> float:
        errors: list[dict[str, float]] = [{} for _ in scan.sites]
        with torch.inference_mode():
            _quantize_sites(named, scan, "smoothquant", references, errors, None, keep=0, alpha=a)
        return float(np.mean([e["smoothquant"] for e in errors])) if errors else 0.0

    seen = descend(grid, error, SMOOTHQUANT_ALPHA.default)
    return [{"alpha": float(a), "error": seen[a]} for a in sorted(seen)]


def descend(grid: tuple[float, ...], f, start: float) -> dict[float, float]:
    """``f`` at the points of the sorted ``grid`` a downhill walk visits: from the point nearest
    ``start`` and its right neighbour, step towards the lower one until ``f`` rises again. On a
    unimodal ``f`` it ends at the grid's minimum, with 3-4 evaluations instead of len(grid)."""
    points = sorted(grid)
    seen: dict[float, float] = {}

    def at(i: int) -> float:
        if points[i] not in seen:
            seen[points[i]] = f(points[i])
        return seen[points[i]]

    i = min(range(len(points)), key=lambda k: abs(points[k] - start))
    if len(points) == 1:
        at(0)
        return seen
    j = i + 1 if i + 1 < len(points) else i - 1
    step = 1 if (at(j) < at(i)) == (j > i) else -1
    k = max(i, j) if step == 1 else min(i, j)
    while 0 <= k + step < len(points) and at(k + step) < at(k):
        k += step
    if 0 <= k + step < len(points):
        at(k + step)  # the rise that ends the walk, so the minimum has both neighbours
    return seen


def best_alpha(sweep: list[dict[str, float]]) -> float:
    """The swept α with the lowest error (the smaller α at a tie: less moved into the weights)."""
    return min(sweep, key=lambda r: (r["error"], r["alpha"]))["alpha"]


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
            state = run_model(loaded, ids, mask).float().cpu()
        for layer, g in slot.items():
            results[layer] = metric(state[g * b : (g + 1) * b])
    return [{"layer": layer, "end": results[layer]} for layer in layers]


def mixed_end(
    loaded,
    scan: QuantScan,
    schemes: list[str | None],
    *,
    keep: int = KEEP_K.default,
    alpha: float = SMOOTHQUANT_ALPHA.default,
) -> float:
    """The end metric with each site quantized by its own scheme (``schemes[i]`` for
    ``scan.sites[i]``; None: full precision), as a recipe mixes them (smoothing where a norm can
    take the scales, per token elsewhere, some blocks kept): one pass of the end texts, with the
    pre-hooks and weight swap of :func:`evaluate`, restored in ``finally``."""
    if len(schemes) != len(scan.sites):
        raise ValueError(f"{len(schemes)} schemes for {len(scan.sites)} sites")
    named = dict(loaded.encoder.named_modules())
    metric = _Metric(loaded, scan)
    originals: dict[torch.nn.Module, torch.Tensor] = {}
    pre = {}
    with torch.inference_mode():
        try:
            for s, scheme in zip(scan.sites, schemes, strict=True):
                if scheme is None:
                    continue
                modules, w = _site_weight(named, s)
                x_fn, w_q = transforms(scheme, w, s.act_max.to(w.device), keep=keep, alpha=alpha)
                _swap_weights(modules, w_q, originals)
                if x_fn is not None:
                    pre.update(dict.fromkeys(modules, _shared_input_hook(x_fn)))
            with forward_hooks(pre, pre=True):
                state = run_model(loaded, scan.end_ids, scan.end_mask).float().cpu()
        finally:
            for m, w in originals.items():
                m.weight.data = w
    return metric(state)


def prefix_curve(
    loaded,
    scan: QuantScan,
    scheme: str = "per_token",
    *,
    keep: int = KEEP_K.default,
    alpha: float = SMOOTHQUANT_ALPHA.default,
    progress: Progress | None = None,
) -> list[dict]:
    """Layer-wise end metric: ``[{"layers": k, "end"}]`` with only blocks ``0 .. k-1`` quantized by
    ``scheme`` (the rest in full precision), k = 1 .. blocks: how the loss builds up through the
    depth (llm-compressor #3154 asks for it after each stage). One pass of the end texts per k."""
    layers = sorted({s.site.layer for s in scan.sites})
    out = []
    for k, last in enumerate(layers, start=1):
        schemes = [scheme if s.site.layer <= last else None for s in scan.sites]
        out.append({"layers": k, "end": mixed_end(loaded, scan, schemes, keep=keep, alpha=alpha)})
        report(progress, k, len(layers))
    return out


def _split_rows(
    modules: list[torch.nn.Module], w_q: torch.Tensor
) -> dict[torch.nn.Module, torch.Tensor]:
    """Each of ``modules``' rows of the stacked weight ``w_q`` (out, in)."""
    out, start = {}, 0
    for m in modules:
        rows = weight_matrix(m).shape[0]
        out[m] = w_q[start : start + rows]
        start += rows
    return out


def _swap_weights(
    modules: list[torch.nn.Module],
    w_q: torch.Tensor,
    originals: dict[torch.nn.Module, torch.Tensor],
) -> None:
    """Give each of ``modules`` its rows of the stacked quantized weight ``w_q`` (out, in),
    remembering the original storage in ``originals`` for the caller's ``finally``."""
    for m, w in _split_rows(modules, w_q).items():
        originals[m] = cast(torch.Tensor, m.weight).data
        _set_weight(m, w)


def quantized_state(
    loaded,
    scan: QuantScan,
    scheme: str,
    *,
    keep: int = KEEP_K.default,
    alpha: float = SMOOTHQUANT_ALPHA.default,
) -> float:
    """The end metric of one scheme alone (every site quantized); see :func:`evaluate`."""
    ev = evaluate(loaded, scan, keep=keep, alpha=alpha, schemes=(scheme,), sensitivity=False)
    assert ev.end is not None  # end=True (the default) measures it
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
