"""One naming scheme for hidden states and LayerNorms across UI, CLI, JSON and code.

Hidden states: ``output_hidden_states=True`` gives L+1 tensors; index 0 is the embedding output
(named ``"emb"``), index i >= 1 is the output of layer i (named ``"1"`` ... ``"L"``).
LayerNorms: ``emb.ln``, ``L3.attn_ln``, ``L3.out_ln``, ``final_ln``, ``head.ln`` (layers 1-based).
"""

from __future__ import annotations


def hidden_state_names(num_layers: int) -> list[str]:
    """``["emb", "1", ..., "L"]`` for a model with ``num_layers`` layers (L+1 hidden states)."""
    return ["emb"] + [str(i) for i in range(1, num_layers + 1)]


def hidden_state_label(index: int) -> str:
    """Label of hidden-state ``index`` (0 is the embedding output)."""
    return "emb" if index == 0 else str(index)


def parse_hidden_state(label: str | int, num_layers: int) -> int:
    """Inverse of :func:`hidden_state_label`; accepts ``"emb"``, ``0`` .. ``L`` or ``-1`` (last)."""
    if isinstance(label, str) and label.strip().lower() in ("emb", "embeddings"):
        return 0
    try:
        index = int(label)
    except (TypeError, ValueError):
        raise ValueError(f"unknown hidden state {label!r}; use 'emb' or 0..{num_layers}") from None
    if index < 0:
        index += num_layers + 1
    if not 0 <= index <= num_layers:
        raise ValueError(f"hidden state {label!r} out of range; use 'emb' or 0..{num_layers}")
    return index
