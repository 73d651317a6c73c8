"""The direct effect of the value on the logits (the logit lens, nostalgebraist 2020): what is
written along u, through the final norm with its per-token scale frozen (unless the state is
already its output) and the unembedding."""

from __future__ import annotations

import numpy as np
import torch

from isoscope.engine.device import to_numpy


def _token_text(tok, ids) -> list[str]:
    return [str(t) for t in tok.convert_ids_to_tokens([int(i) for i in ids])]


def unembedding(loaded) -> torch.Tensor | None:
    """The (V, d) unembedding: the output embeddings, else the input table when the config ties
    them; None when the model has neither."""
    model = loaded.model
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if out is None and getattr(model.config, "tie_word_embeddings", False):
        out = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    weight = getattr(out, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.ndim != 2:
        return None
    return weight.detach()


def logit_effect(
    loaded, u, raw_value, result, top, final_params, after_final, k, final
) -> dict | None:
    """The direct effect on the logits (the logit lens): the value written along u, through the
    final norm with its scale frozen (unless the state is already its output) and the
    unembedding."""
    w_u = unembedding(loaded)
    if w_u is None or w_u.shape[1] != len(u):
        return None
    if after_final or final_params is None:
        coef, direction = raw_value, u
    else:
        gamma = final_params[0]
        centred = u - u.mean() if final.kind == "layernorm" else u
        coef, direction = raw_value / result.lens_scale, gamma * centred
    along = torch.as_tensor(direction, dtype=torch.float32, device=w_u.device)
    per_token = to_numpy(w_u.float() @ along)  # (V,) logit change per unit of coef
    mean_coef = float(coef.mean())
    top_coef = float(coef[top].mean()) if len(top) else 0.0
    effect = mean_coef * per_token
    order = np.argsort(-effect, kind="stable")
    tok = loaded.tokenizer

    def listed(ids) -> list[dict]:
        names = _token_text(tok, ids)
        return [
            {
                "token": n,
                "id": int(i),
                "mean": float(effect[i]),
                "at_top": float(top_coef * per_token[i]),
            }
            for n, i in zip(names, ids, strict=True)
        ]

    return {
        "promotes": listed(order[:k]),
        "suppresses": listed(order[::-1][:k]),
        "through_final_norm": not (after_final or final_params is None),
    }
