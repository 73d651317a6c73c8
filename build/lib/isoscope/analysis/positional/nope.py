"""Variance lab: position from shrinking self-attention variance without position embeddings.

Chi, Fan, Chen, Rudnicky & Ramadge 2023, "Latent Positional Information is in the Self-Attention
Variance of Transformer Language Models Without Positional Embeddings" (arXiv 2305.13571).

Setting: a randomly initialised, frozen, pre-LN causal Transformer (HF GPT-2 blocks) with *no*
position embeddings (``random:gpt2-nope``: the position table is zero), fed random inputs. At
init the queries and keys are tiny, so attention is near uniform and the attention output at
position m (1-based) averages m independent value vectors. With W_V ~ N(0, sigma^2),
c_proj ~ N(0, sigma_o^2) and the LayerNorm output of unit variance per entry,

    Var[o_m] ~ d * sigma_o^2 * d * sigma^2 / m        (d = model width)

so log Var falls with slope -1 in log m: position is readable from the variance. A bidirectional
mask makes every position average all T values, so the variance is flat (d sigma_o^2 d sigma^2 / T).

Measured: per layer and position, the variance over features of the attention output (the
attention module's output, i.e. c_proj before the residual add) and of the residual stream
after the block; mean and std over seeds. sigma and sigma_o are the *measured* stds of layer 1's
value weights and c_proj weights (HF GPT-2 draws c_proj with std init_std / sqrt(2 n_layer)).
Inputs: ``tokens`` = uniform random token ids through the random token embedding (N(0,
init_std^2) rows), or ``gaussian`` = inputs_embeds drawn N(0, init_std^2) directly (no repeated
tokens). The log-log slope is a least-squares fit over positions ``fit_from .. T``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from typing import Any, cast

import numpy as np
import torch

from isoscope.analysis.positional.params import (
    NOPE_BATCH,
    NOPE_D_MODEL,
    NOPE_FIT_FROM,
    NOPE_HEADS,
    NOPE_INIT_STD,
    NOPE_LAYERS,
    NOPE_SEEDS,
    NOPE_SEQ_LEN,
)
from isoscope.engine.arch import architecture
from isoscope.engine.arch.hooks import forward_hooks
from isoscope.engine.budget.progress import Progress
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError, UnsupportedModelError
from isoscope.engine.extraction import forward_batches, tokenize
from isoscope.engine.load.models import LoadedModel, build_random_model

INPUT_KINDS = ("tokens", "gaussian")


@dataclass(frozen=True)
class NopeSettings:
    """Parameters of the random-model variance lab (all part of the cache key)."""

    d_model: int = NOPE_D_MODEL.default
    layers: int = NOPE_LAYERS.default
    heads: int = NOPE_HEADS.default
    seq_len: int = NOPE_SEQ_LEN.default
    seeds: int = NOPE_SEEDS.default
    init_std: float = NOPE_INIT_STD.default
    batch: int = NOPE_BATCH.default
    inputs: str = "tokens"
    vocab_size: int = 8192
    bidirectional: bool = False
    fit_from: int = NOPE_FIT_FROM.default

    def __post_init__(self) -> None:
        NOPE_D_MODEL.check(self.d_model, "width")
        NOPE_LAYERS.check(self.layers, "layers")
        NOPE_HEADS.check(self.heads, "heads")
        NOPE_SEQ_LEN.check(self.seq_len, "sequence length")
        NOPE_SEEDS.check(self.seeds, "seeds")
        NOPE_INIT_STD.check(self.init_std, "init std")
        NOPE_BATCH.check(self.batch, "batch")
        checks = [
            (
                self.d_model % self.heads == 0,
                f"width {self.d_model} must be divisible by the number of heads {self.heads}",
            ),
            (
                self.inputs in INPUT_KINDS,
                f"inputs must be one of {', '.join(INPUT_KINDS)}, got {self.inputs!r}",
            ),
            (
                16 <= self.vocab_size <= 200_000,
                f"vocab size must be between 16 and 200,000, got {self.vocab_size}",
            ),
            (
                1 <= self.fit_from < self.seq_len,
                f"fit start must be between 1 and seq_len - 1, got {self.fit_from}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise InputError(message)


@dataclass(frozen=True)
class VarianceCurves:
    """Variance over features per layer and position, over seeds (or texts).

    Shapes (L layers, T positions): ``attn_mean``, ``attn_std``, ``resid_mean``, ``resid_std``
    float64 (L, T); ``attn_per_seed`` (seeds, L, T); ``positions`` (T,) 1-based m;
    ``theory`` (T,) or None; ``slopes`` / ``resid_slopes`` (L,) log-log fits over
    ``fit_range`` (1-based positions, inclusive); ``counts`` (T,) sequences per position.
    """

    positions: np.ndarray
    attn_mean: np.ndarray
    attn_std: np.ndarray
    resid_mean: np.ndarray
    resid_std: np.ndarray
    attn_per_seed: np.ndarray
    theory: np.ndarray | None
    slopes: np.ndarray
    resid_slopes: np.ndarray
    fit_range: tuple[int, int]
    counts: np.ndarray
    causal: bool
    description: str
    weight_stds: dict[str, float]
    seconds: float
    settings: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "layers": [
                {
                    "index": i,
                    "attn_output_variance": self.attn_mean[i].tolist(),
                    "attn_output_variance_std": self.attn_std[i].tolist(),
                    "residual_variance": self.resid_mean[i].tolist(),
                    "slope": float(self.slopes[i]),
                    "residual_slope": float(self.resid_slopes[i]),
                }
                for i in range(self.attn_mean.shape[0])
            ],
            "theory": None if self.theory is None else self.theory.tolist(),
            "positions": self.positions.tolist(),
            "fit_range": list(self.fit_range),
            "causal": self.causal,
            "weight_stds": self.weight_stds,
            "seconds": self.seconds,
            "description": self.description,
            "settings": self.settings,
        }

    def frame(self):
        """Long table: layer, position, attention-output variance (mean, std), residual variance."""
        import pandas as pd  # lazy: a slow import that only the table views need

        layers, seq = self.attn_mean.shape
        return pd.DataFrame(
            {
                "layer": np.repeat(np.arange(1, layers + 1), seq),
                "position": np.tile(self.positions, layers),
                "attn_output_variance": self.attn_mean.ravel(),
                "attn_output_variance_std": self.attn_std.ravel(),
                "residual_variance": self.resid_mean.ravel(),
                "theory": np.tile(self.theory, layers) if self.theory is not None else np.nan,
            }
        )


def loglog_slope(
    positions: np.ndarray, values: np.ndarray, start: int = 1, stop: int | None = None
) -> float:
    """Least-squares slope of log(values) against log(positions) for start <= position <= stop."""
    positions = np.asarray(positions, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    keep = (positions >= start) & np.isfinite(values) & (values > 0)
    if stop is not None:
        keep &= positions <= stop
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(positions[keep]), np.log(values[keep]), 1)[0])


def theory_variance(
    d_model: int, sigma: float, sigma_o: float, positions: np.ndarray, bidirectional: bool = False
) -> np.ndarray:
    """Chi et al.: Var[o_m] = d sigma_o^2 * d sigma^2 / m (causal); / T for every m (bidirectional)."""
    positions = np.asarray(positions, dtype=np.float64)
    numerator = d_model * sigma_o**2 * d_model * sigma**2
    if bidirectional:
        return np.full_like(positions, numerator / positions.max())
    return numerator / positions


def _additive_mask(seq: int, causal: bool, dtype: torch.dtype) -> torch.Tensor:
    """(1, 1, T, T) float mask added to the logits: 0 = attend, dtype min = blocked."""
    mask = torch.zeros(1, 1, seq, seq, dtype=dtype)
    if causal:
        mask.masked_fill_(torch.ones(seq, seq, dtype=torch.bool).triu(1), torch.finfo(dtype).min)
    return mask


def _run_random(
    model: torch.nn.Module, inputs: torch.Tensor, causal: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Attention-output and residual variance over features, (L, T) each, averaged over the batch.

    Runs the GPT-2 blocks one by one with an explicit additive mask (causal or none), so the same
    weights serve both the causal run and the bidirectional contrast.
    """
    gpt2: Any = model  # a GPT-2 (build_random_model): its wpe and blocks h
    attn_var, resid_var = [], []
    captured: dict[str, torch.Tensor] = {}

    def hook(module, args, output):
        captured["attn"] = output[0] if isinstance(output, tuple) else output

    seq = inputs.shape[1]
    mask = _additive_mask(seq, causal, inputs.dtype)
    positions = torch.arange(seq)[None]
    with torch.inference_mode():
        hidden = inputs + gpt2.wpe(positions)  # wpe is zero (NoPE); kept so the graph is GPT-2's
        for block in gpt2.h:
            with forward_hooks({block.attn: hook}):
                out = block(hidden, attention_mask=mask)
            hidden = out[0] if isinstance(out, tuple) else out
            attn_var.append(captured["attn"].double().var(dim=-1, unbiased=False).mean(dim=0))
            resid_var.append(hidden.double().var(dim=-1, unbiased=False).mean(dim=0))
    return to_numpy(torch.stack(attn_var)), to_numpy(torch.stack(resid_var))


def measured_stds(model: torch.nn.Module) -> dict[str, float]:
    """Std of layer 1's value weights (sigma), c_proj (sigma_o) and the token embedding."""
    gpt2: Any = model  # a GPT-2 (build_random_model): its blocks h, wte and config
    block = gpt2.h[0]
    d = gpt2.config.n_embd
    value = block.attn.c_attn.weight.detach()[:, 2 * d :]  # Conv1D: (in, 3d), columns q | k | v
    return {
        "sigma_value": float(value.double().std()),
        "sigma_o": float(block.attn.c_proj.weight.detach().double().std()),
        "sigma_embedding": float(gpt2.wte.weight.detach().double().std()),
        "ln_gamma_mean": float(block.ln_1.weight.detach().double().mean()),
    }


def variance_lab(
    settings: NopeSettings | None = None, progress: Progress | None = None
) -> VarianceCurves:
    """Chi et al.'s experiment on ``settings.seeds`` random NoPE GPT-2 models (causal, or
    bidirectional when ``settings.bidirectional``)."""
    s = settings or NopeSettings()
    return variance_lab_pair(s, progress, masks=(not s.bidirectional,))[0]


def variance_lab_pair(
    settings: NopeSettings | None = None,
    progress: Progress | None = None,
    masks: tuple[bool, ...] = (True, False),
) -> list[VarianceCurves]:
    """The experiment once per mask in ``masks`` (True = causal) on the *same* random models and
    inputs, so the bidirectional contrast differs from the causal run only by the mask."""
    s = settings or NopeSettings()
    started = time.perf_counter()
    runs: dict[bool, tuple[list, list]] = {causal: ([], []) for causal in masks}
    stds = []
    for seed in range(s.seeds):
        options = {
            "layers": s.layers,
            "width": s.d_model,
            "heads": s.heads,
            "seed": seed,
            "init_std": s.init_std,
            "max_positions": s.seq_len,
        }
        model = build_random_model("gpt2-nope", options, s.vocab_size)
        model.eval()
        stds.append(measured_stds(model))
        gen = torch.Generator().manual_seed(10_000 + seed)
        if s.inputs == "tokens":
            ids = torch.randint(0, s.vocab_size, (s.batch, s.seq_len), generator=gen)
            with torch.inference_mode():
                inputs = cast(Any, model).wte(ids)  # GPT-2's token embedding
        else:
            inputs = torch.randn(s.batch, s.seq_len, s.d_model, generator=gen) * s.init_std
        for causal in masks:
            attn, resid = _run_random(model, inputs, causal)
            runs[causal][0].append(attn)
            runs[causal][1].append(resid)
        if progress is not None:
            progress(seed + 1, s.seeds)
    weight_stds = {k: float(np.mean([d[k] for d in stds])) for k in stds[0]}
    positions = np.arange(1, s.seq_len + 1)
    out = []
    for causal in masks:
        theory = theory_variance(
            s.d_model, weight_stds["sigma_value"], weight_stds["sigma_o"], positions, not causal
        )
        out.append(
            _curves(
                positions,
                np.stack(runs[causal][0]),
                np.stack(runs[causal][1]),
                theory,
                causal,
                s.fit_from,
                description=(
                    f"random NoPE GPT-2, width {s.d_model}, {s.layers} layers, {s.heads} heads, "
                    f"{'causal' if causal else 'bidirectional'}, {s.inputs} "
                    f"inputs, {s.seeds} seed(s) x {s.batch} sequences"
                ),
                weight_stds=weight_stds,
                started=started,
                settings=asdict(replace(s, bidirectional=not causal)),
                counts=np.full(s.seq_len, s.seeds * s.batch),
            )
        )
    return out


def _curves(
    positions,
    attn_runs,
    resid_runs,
    theory,
    causal,
    fit_from,
    *,
    description,
    weight_stds,
    started,
    settings,
    counts,
    attn_std=None,
    resid_std=None,
) -> VarianceCurves:
    """Means over runs (axis 0) and log-log fits; stds over runs unless given."""
    attn_mean = attn_runs.mean(axis=0)
    resid_mean = resid_runs.mean(axis=0)
    stop = int(positions.max())
    fit_from = min(int(fit_from), stop - 1)
    return VarianceCurves(
        positions=positions,
        attn_mean=attn_mean,
        attn_std=attn_runs.std(axis=0) if attn_std is None else attn_std,
        resid_mean=resid_mean,
        resid_std=resid_runs.std(axis=0) if resid_std is None else resid_std,
        attn_per_seed=attn_runs,
        theory=theory,
        slopes=np.array([loglog_slope(positions, row, fit_from, stop) for row in attn_mean]),
        resid_slopes=np.array([loglog_slope(positions, row, fit_from, stop) for row in resid_mean]),
        fit_range=(fit_from, stop),
        counts=np.asarray(counts),
        causal=causal,
        description=description,
        weight_stds=weight_stds,
        seconds=time.perf_counter() - started,
        settings=settings,
    )


# ----------------------------------------------------------------------------- loaded models


def attention_output_modules(loaded: LoadedModel) -> list[torch.nn.Module]:
    """Per layer, the module whose output is the attention output before the residual add (from
    the architecture map): GPT-2 ``h.i.attn`` (= c_proj), BERT ``layer.i.attention.output.dense``,
    Llama-style ``layers.i.self_attn`` (= o_proj), GPT-NeoX ``layers.i.attention``, OPT
    ``layers.i.self_attn``."""
    try:
        return [layer.attention_output for layer in architecture(loaded).layers]
    except UnsupportedModelError as exc:
        raise UnsupportedModelError(f"the variance view cannot find the attention: {exc}") from exc


def variance_on_model(
    loaded: LoadedModel,
    texts: tuple[str, ...] | list[str],
    max_length: int = 128,
    batch_size: int = 16,
    fit_from: int = 4,
    progress: Progress | None = None,
) -> VarianceCurves:
    """The same measurement on a loaded model and real texts: per layer and position m (1-based),
    the variance over features of the attention output and of the hidden state after the layer,
    averaged over the texts that reach position m (std over those texts in ``*_std``).

    Meaningful for causal models (Chi et al. study causal LMs); for a bidirectional model it is
    shown as a contrast. No theory line: trained weights are not i.i.d. Gaussian.
    """
    started = time.perf_counter()
    modules = attention_output_modules(loaded)
    tokenized = tokenize(loaded, tuple(texts), max_length)
    seq = int(tokenized.lengths.max())
    num_layers = len(modules)
    sums = np.zeros((2, num_layers, seq))
    squares = np.zeros((2, num_layers, seq))
    counts = np.zeros(seq)
    captured: dict[int, torch.Tensor] = {}

    def make_hook(i: int):
        def hook(module, args, output):
            captured[i] = output[0] if isinstance(output, tuple) else output

        return hook

    with forward_hooks({m: make_hook(i) for i, m in enumerate(modules)}):
        for _, hidden, attn_mask in forward_batches(loaded, tokenized, batch_size, progress):
            mask = to_numpy(attn_mask)  # (B, T) float64
            width = mask.shape[1]
            for i in range(num_layers):
                attn_var = to_numpy(
                    captured[i].to("cpu", torch.float64).var(dim=-1, unbiased=False)
                )  # (B, T)
                resid_var = to_numpy(hidden[i + 1].double().var(dim=-1, unbiased=False))
                for k, v in enumerate((attn_var, resid_var)):
                    sums[k, i, :width] += (v * mask).sum(axis=0)
                    squares[k, i, :width] += (v**2 * mask).sum(axis=0)
            counts[:width] += mask.sum(axis=0)
    n = np.maximum(counts, 1)
    mean = sums / n
    std = np.sqrt(np.maximum(squares / n - mean**2, 0))
    positions = np.arange(1, seq + 1)
    # Only positions reached by at least 3 texts enter the curves (the tail is a handful of texts).
    reach = counts >= min(3, counts.max())
    last = int(positions[reach].max())
    return _curves(
        positions[:last],
        mean[0][None, :, :last],
        mean[1][None, :, :last],
        None,
        loaded.info.is_causal,
        fit_from,
        description=(
            f"{loaded.info.display_name} on {len(texts)} texts "
            f"({'causal' if loaded.info.is_causal else 'bidirectional'})"
        ),
        weight_stds={},
        started=started,
        settings={"max_length": max_length, "num_texts": len(texts)},
        counts=counts[:last],
        attn_std=std[0][:, :last],
        resid_std=std[1][:, :last],
    )
