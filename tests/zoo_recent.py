"""The second zoo: tiny random checkpoints (4 layers, width 64) of the 2025-26 families that are no
longer plain attention stacks: state-space and recurrent models (Mamba, Mamba-2, RWKV,
RecurrentGemma), hybrids of attention with Mamba/Mamba-2 (Jamba, Falcon-H1 in parallel, Bamba,
Granite-4 hybrid, Nemotron-H, Zamba2 with one shared attention block), with Gated DeltaNet
(Qwen3-Next, Qwen3.5), short convolutions (LFM2, LFM2-MoE) or other linear attentions (MiniMax,
Kimi-Linear), multi-head latent attention (DeepSeek-V2/V3), recent MoEs (GLM-4-MoE, HunYuan-MoE,
dots1, ERNIE-4.5-MoE), recent dense decoders (Ministral-3, Olmo-3) and Gemma 3n (AltUp streams).

Four layers so that every hybrid has at least two layers of each kind, placed at odd and even
indices. The configs are the smallest that transformers builds for each family; :func:`build`
saves a seeded random model and the first zoo's word-level tokenizer to a folder, which isoscope's
real loader then reads like any checkpoint.
"""

from __future__ import annotations

from pathlib import Path

from tests import zoo
from tests.zoo import FF, H, V, W, tokenizer  # the first zoo's sizes, with four layers

L = 4

_IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
_DEC = zoo._DEC | dict(num_hidden_layers=L, **_IDS)
# Mamba-2 mixers: 8 heads of 16 channels = expand (2) x width
_MAMBA2 = dict(
    mamba_d_state=8,
    mamba_d_conv=4,
    mamba_expand=2,
    mamba_n_heads=8,
    mamba_d_head=16,
    mamba_n_groups=1,
    mamba_chunk_size=16,
)
# Gated DeltaNet mixers (Qwen3-Next, Qwen3.5)
_DELTANET = dict(
    head_dim=16,
    layer_types=["linear_attention", "full_attention"] * 2,
    linear_num_value_heads=4,
    linear_num_key_heads=2,
    linear_key_head_dim=16,
    linear_value_head_dim=16,
    linear_conv_kernel_dim=4,
)
# DeepSeek-style routed experts with one shared expert and a dense first layer
_DS_MOE = dict(
    n_routed_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=32,
    n_shared_experts=1,
    first_k_dense_replace=1,
    n_group=1,
    topk_group=1,
)
# multi-head latent attention: no grouped KV heads; 16 "nope" + 8 rotary dims per query/key head
_MLA = dict(
    num_key_value_heads=H,
    kv_lora_rank=16,
    qk_nope_head_dim=16,
    qk_rope_head_dim=8,
    v_head_dim=16,
)

# family (config model_type) -> (config class name, tiny kwargs)
FAMILIES: dict[str, tuple[str, dict]] = {
    # pure state-space and recurrent models: no attention layer at all
    "mamba": (
        "MambaConfig",
        dict(vocab_size=V, hidden_size=W, num_hidden_layers=L, state_size=8, expand=2, **_IDS),
    ),
    "mamba2": (
        "Mamba2Config",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_hidden_layers=L,
            state_size=8,
            expand=2,
            num_heads=8,
            head_dim=16,
            n_groups=1,
            chunk_size=16,
            **_IDS,
        ),
    ),
    "rwkv": (
        "RwkvConfig",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_hidden_layers=L,
            attention_hidden_size=W,
            intermediate_size=FF,
            context_length=128,
            **_IDS,
        ),
    ),
    # two recurrent (RG-LRU) blocks, then one local attention block
    "recurrent_gemma": (
        "RecurrentGemmaConfig",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_hidden_layers=L,
            num_attention_heads=H,
            num_key_value_heads=1,
            head_dim=16,
            intermediate_size=FF,
            lru_width=W,
            attention_window_size=16,
            block_types=["recurrent", "recurrent", "attention"],
            **_IDS,
        ),
    ),
    # hybrids of attention with Mamba / Mamba-2
    "jamba": (
        "JambaConfig",
        _DEC
        | dict(
            num_experts=4,
            num_experts_per_tok=2,
            expert_layer_period=2,
            expert_layer_offset=1,
            attn_layer_period=2,
            attn_layer_offset=1,
            mamba_d_state=8,
            mamba_d_conv=4,
            mamba_expand=2,
            mamba_dt_rank=8,
        ),
    ),
    "falcon_h1": ("FalconH1Config", _DEC | _MAMBA2 | dict(head_dim=16, mamba_d_ssm=2 * W)),
    "bamba": ("BambaConfig", _DEC | _MAMBA2 | dict(attn_layer_indices=[1, 3])),
    "granitemoehybrid": (
        "GraniteMoeHybridConfig",
        _DEC
        | _MAMBA2
        | dict(
            layer_types=["mamba", "attention"] * 2,
            num_local_experts=4,
            num_experts_per_tok=2,
            shared_intermediate_size=64,
        ),
    ),
    # M = Mamba-2, * = attention, - = MLP
    "nemotron_h": (
        "NemotronHConfig",
        _DEC
        | dict(
            hybrid_override_pattern="M*M-",
            head_dim=16,
            ssm_state_size=8,
            mamba_num_heads=8,
            mamba_head_dim=16,
            n_groups=1,
            conv_kernel=4,
            chunk_size=16,
            expand=2,
        ),
    ),
    # one attention block shared by the "hybrid" layers
    "zamba2": (
        "Zamba2Config",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_hidden_layers=L,
            num_attention_heads=H,
            num_key_value_heads=H,
            intermediate_size=FF,
            layers_block_type=["mamba", "hybrid"] * 2,
            mamba_d_state=8,
            mamba_d_conv=4,
            mamba_expand=2,
            mamba_headdim=16,
            mamba_ngroups=1,
            n_mamba_heads=8,
            chunk_size=16,
            max_position_embeddings=128,
            use_mem_rope=True,
            **_IDS,
        ),
    ),
    # Gated DeltaNet + full attention
    "qwen3_next": (
        "Qwen3NextConfig",
        _DEC
        | _DELTANET
        | dict(
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=64,
            decoder_sparse_step=1,
        ),
    ),
    "qwen3_5_text": ("Qwen3_5TextConfig", _DEC | _DELTANET),
    # short convolutions + full attention
    "lfm2": (
        "Lfm2Config",
        _DEC | dict(layer_types=["conv", "full_attention"] * 2, conv_L_cache=3, block_ff_dim=FF),
    ),
    "lfm2_moe": (
        "Lfm2MoeConfig",
        _DEC
        | dict(
            layer_types=["conv", "full_attention"] * 2,
            conv_L_cache=3,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            num_dense_layers=1,
        ),
    ),
    # other linear attentions + full attention
    "minimax": (
        "MiniMaxConfig",
        _DEC
        | dict(
            head_dim=16,
            layer_types=["linear_attention", "full_attention"] * 2,
            num_local_experts=4,
            num_experts_per_tok=2,
            block_size=16,
        ),
    ),
    "kimi_linear": (  # KDA layers 1 and 3, MLA layers 2 and 4 (1-based in the config)
        "KimiLinearConfig",
        _DEC
        | _MLA
        | dict(
            head_dim=16,
            linear_attn_config={
                "kda_layers": [1, 3],
                "full_attn_layers": [2, 4],
                "num_heads": H,
                "head_dim": 16,
                "short_conv_kernel_size": 4,
            },
            num_experts=4,
            num_experts_per_token=2,
            moe_intermediate_size=32,
            first_k_dense_replace=1,
            q_lora_rank=None,
        ),
    ),
    # multi-head latent attention
    "deepseek_v2": ("DeepseekV2Config", _DEC | _DS_MOE | _MLA | dict(q_lora_rank=32)),
    "deepseek_v3": ("DeepseekV3Config", _DEC | _DS_MOE | _MLA | dict(q_lora_rank=32)),
    # recent MoEs
    "glm4_moe": ("Glm4MoeConfig", _DEC | _DS_MOE | dict(head_dim=16)),
    "hunyuan_v1_moe": (
        "HunYuanMoEV1Config",
        _DEC
        | dict(
            head_dim=16, num_experts=4, moe_topk=2, moe_intermediate_size=32, num_shared_expert=1
        ),
    ),
    "dots1": ("Dots1Config", _DEC | _DS_MOE | dict(head_dim=16)),
    "ernie4_5_moe": (
        "Ernie4_5_MoeConfig",
        _DEC
        | dict(
            head_dim=16,
            moe_num_experts=4,
            moe_k=2,
            moe_intermediate_size=32,
            moe_num_shared_experts=1,
            moe_layer_start_index=1,
        ),
    ),
    # recent dense decoders
    "ministral3": ("Ministral3Config", _DEC | dict(head_dim=16, sliding_window=16)),
    "olmo3": ("Olmo3Config", _DEC | dict(sliding_window=16)),
    # four AltUp copies of the residual stream
    "gemma3n_text": (
        "Gemma3nTextConfig",
        _DEC
        | dict(
            head_dim=16,
            num_kv_shared_layers=0,
            altup_num_inputs=4,
            laurel_rank=8,
            hidden_size_per_layer_input=8,
            vocab_size_per_layer_input=V,
            intermediate_size=[FF] * L,
            activation_sparsity_pattern=[0.0] * L,
            sliding_window=16,
            layer_types=["sliding_attention"] * 3 + ["full_attention"],
        ),
    ),
}

# families with no softmax-attention layer at all
NO_ATTENTION = ("mamba", "mamba2", "rwkv")
# one representative of each kind, for the page tests
HYBRID, SSM, MLA, ALTUP = "qwen3_5_text", "mamba2", "deepseek_v3", "gemma3n_text"


def config_of(family: str):
    import transformers

    cls_name, kwargs = FAMILIES[family]
    return getattr(transformers, cls_name)(**kwargs)


def build(family: str, folder: Path, seed: int = 0) -> Path:
    """Save a seeded random ``family`` base model (safetensors) and the tokenizer to ``folder``."""
    import torch
    from transformers import AutoModel

    torch.manual_seed(seed)
    model = AutoModel.from_config(config_of(family))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer().save_pretrained(folder)
    return folder
