"""What the unit tests of the quant recipe share: SmoothQuant mappings named as a Llama names its
modules, planted without a model."""

from __future__ import annotations

from isoscope.analysis.quant.mappings import Mapping


def llama_like(layers: int, prefix: str = "model.layers") -> list[Mapping]:
    """Both norms of every block of a ``layers``-block Llama, each with the projections it feeds."""
    out = []
    for i in range(layers):
        p = f"{prefix}.{i}"
        out.append(
            Mapping(
                i,
                "pre_attn",
                f"{p}.input_layernorm",
                tuple(f"{p}.self_attn.{x}_proj" for x in "qkv"),
            )
        )
        out.append(
            Mapping(
                i,
                "pre_mlp",
                f"{p}.post_attention_layernorm",
                (f"{p}.mlp.gate_proj", f"{p}.mlp.up_proj"),
            )
        )
    return out
