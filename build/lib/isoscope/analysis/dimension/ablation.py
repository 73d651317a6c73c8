"""What removing the dimension does: zero it or replace it by its corpus mean at the chosen state
and run the rest of the model (BERT Busters, Kovaleva et al. 2021, ablated a few LayerNorm
dimensions this way). The effect is the change in next-token loss for a decoder whose unembedding
is known, and for every model the change of the final state (1 - cosine with the unablated one,
and the relative norm of the difference). Random basis dimensions ablated the same way are the
controls. Each ablation is one forward pass over the first ``ablation_texts`` texts."""

from __future__ import annotations

import numpy as np
import torch

from isoscope.analysis.dimension.logits import unembedding
from isoscope.engine.arch import blocks_of, is_causal, wiring
from isoscope.engine.arch.hooks import forward_hooks
from isoscope.engine.budget.batching import plan_batches
from isoscope.engine.errors import UnsupportedModelError
from isoscope.engine.extraction import TokenizedCorpus, pad_batch, pad_token_id, residual_states


def _replace_along(h: torch.Tensor, u: torch.Tensor, target: float) -> torch.Tensor:
    """h with its component along u set to ``target`` (h . u / |u|^2 -> target / |u|^2)."""
    coef = (h.float() @ u) / (u @ u)
    return (h.float() + (target / (u @ u) - coef)[..., None] * u).to(h.dtype)


def _site(loaded, source: tuple[int, bool]):
    """(module, pre) whose input (pre) or output is the hidden state (``source``:
    :func:`~isoscope.analysis.dimension.card.state_source`)."""
    found = blocks_of(loaded.model)
    if found is None:
        raise UnsupportedModelError("the model has no list of per-layer blocks to ablate at")
    blocks = found[1]
    count, final = source
    if final:
        norm = next(n for n in wiring(loaded).norms if n.role == "final")
        return dict(loaded.model.named_modules())[norm.path], False
    if count == 0:
        return blocks[0], True
    return blocks[count - 1], False


def _hook(pre: bool, u: torch.Tensor, target: float):
    if pre:

        def pre_hook(module, args, kwargs):
            if args and isinstance(args[0], torch.Tensor):
                return (_replace_along(args[0], u, target), *args[1:]), kwargs
            if isinstance(kwargs.get("hidden_states"), torch.Tensor):
                kwargs = dict(
                    kwargs, hidden_states=_replace_along(kwargs["hidden_states"], u, target)
                )
            return args, kwargs

        return pre_hook

    def post_hook(module, args, kwargs, output):
        if isinstance(output, tuple):
            return (_replace_along(output[0], u, target), *output[1:])
        return _replace_along(output, u, target)

    return post_hook


def _run(loaded, tokenized, rows_list, w_u, hook_spec=None) -> tuple[list, list]:
    """Per batch: (final states of the real tokens, per-token next-token losses or None)."""
    encoder = loaded.encoder
    device = loaded.device
    pad_id = pad_token_id(loaded)
    extra = {"use_cache": False} if getattr(encoder.config, "use_cache", None) is not None else {}
    finals, losses = [], []
    hooks = {}
    pre = False
    if hook_spec is not None:
        module, pre, fn = hook_spec
        hooks = {module: fn}
    with forward_hooks(hooks, pre=pre, with_kwargs=True), torch.inference_mode():
        for rows in rows_list:
            ids, mask = pad_batch(tokenized, rows, pad_id)
            ids_t = torch.from_numpy(ids).to(device)
            mask_t = torch.from_numpy(mask).to(device)
            out = encoder(
                input_ids=ids_t, attention_mask=mask_t, output_hidden_states=True, **extra
            )
            last = residual_states(out, encoder)[-1].float()
            finals.append(last[mask_t.bool()].cpu())
            if w_u is not None:
                logits = last[:, :-1] @ w_u.T  # (B, T - 1, V)
                nll = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), ids_t[:, 1:].reshape(-1), reduction="none"
                ).reshape(logits.shape[:2])
                valid = (mask_t[:, 1:] * mask_t[:, :-1]).bool()
                losses.append(nll[valid].cpu())
    return finals, losses


def _effect(base_finals, base_losses, finals, losses) -> dict:
    a = torch.cat(base_finals)
    b = torch.cat(finals)
    cosine = torch.nn.functional.cosine_similarity(a, b, dim=-1)
    change = (b - a).norm(dim=-1) / a.norm(dim=-1).clamp_min(1e-12)
    effect = {
        "final_state_1_minus_cosine": float((1 - cosine).mean()),
        "final_state_relative_change": float(change.mean()),
    }
    if base_losses:
        loss = float(torch.cat(losses).mean())
        effect |= {"loss": loss, "delta_loss": loss - float(torch.cat(base_losses).mean())}
    return effect


def ablation_effects(
    loaded, tokenized: TokenizedCorpus, u, settings, raw_value, result, source
) -> dict:
    """Zero / mean ablation of u at ``settings.state`` and of ``settings.controls`` random basis
    dimensions, over the first ``settings.ablation_texts`` texts (module doc)."""
    n_texts = min(settings.ablation_texts, len(tokenized.input_ids))
    rows_list = plan_batches(tokenized.lengths[:n_texts], settings.batch_size)
    device = loaded.device
    decoder = bool(is_causal(loaded))
    w_u = unembedding(loaded) if decoder else None
    w_u = w_u.float() if w_u is not None and w_u.shape[1] == len(u) else None
    module, pre = _site(loaded, source)
    base_finals, base_losses = _run(loaded, tokenized, rows_list, w_u)
    n = max(len(raw_value), 1)
    state_mean = result.state_sum / n

    def both(vec: np.ndarray, mean_value: float) -> dict:
        ut = torch.as_tensor(vec, dtype=torch.float32, device=device)
        out = {}
        for mode, target in (("zero", 0.0), ("mean", mean_value)):
            spec = (module, pre, _hook(pre, ut, float(target)))
            finals, losses = _run(loaded, tokenized, rows_list, w_u, spec)
            out[mode] = _effect(base_finals, base_losses, finals, losses)
        return out

    own = both(np.asarray(u, dtype=np.float64), float(raw_value.mean()))
    rng = np.random.default_rng(settings.seed)
    candidates = [j for j in range(len(u)) if j != settings.dim]
    picked = rng.choice(candidates, size=min(settings.controls, len(candidates)), replace=False)
    controls = []
    for j in sorted(int(j) for j in picked):
        e = np.zeros(len(u))
        e[j] = 1.0
        controls.append({"dim": j, **both(e, float(state_mean[j]))})
    summary = {}
    for mode in ("zero", "mean"):
        keys = controls[0][mode].keys() if controls else ()
        summary[mode] = {k: float(np.mean([c[mode][k] for c in controls])) for k in keys}
    return {
        "texts": n_texts,
        "tokens": int(sum(len(f) for f in base_finals)),
        "metric": "next-token loss" if w_u is not None else "final state",
        "baseline_loss": float(torch.cat(base_losses).mean()) if base_losses else None,
        "zero": own["zero"],
        "mean": own["mean"],
        "mean_value": float(raw_value.mean()),
        "controls": controls,
        "controls_mean": summary,
    }
