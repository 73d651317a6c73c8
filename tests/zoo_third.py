"""The third zoo: tiny random checkpoints (2 layers, width 32) of transformers text families that
neither other zoo holds (``tests/zoo.py``, ``tests/zoo_recent.py``), chosen for the ways they
differ from a stack of masked attention layers: token mixers over the whole padded length (FNet's
Fourier mixing, ConvBERT's convolutions, Nyström, YOSO and MRA approximations, Reformer's hashing),
self-computed attention (GPT-J, GPT-Neo, CodeGen), causal text towers of dual encoders (CLIP,
SigLIP), pooled or sequence-first states (Funnel, XLNet), recurrent and hybrid decoders (xLSTM,
Falcon-Mamba, Zamba), MoEs (OLMoE, JetMoE, DBRX, PhiMoE, GraniteMoE) and encoder-decoders (LongT5,
UMT5, Switch, FSMT, LED, M2M100, ProphetNet).

Each family is a config class name and the keyword arguments that make it tiny; :func:`build`
saves a seeded random base model with the first zoo's word-level tokenizer to a folder, which
isoscope's real loader then reads like any checkpoint. ``tests/integration/engine/test_zoo_third.py``
checks each one is read right or refused in one line; ``docs/architectures.md`` keeps the table.
"""

from __future__ import annotations

from pathlib import Path

from tests.zoo import V, tokenizer

W, L, H, FF = 32, 2, 2, 64

_IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
_ENC = dict(
    vocab_size=V,
    hidden_size=W,
    num_hidden_layers=L,
    num_attention_heads=H,
    intermediate_size=FF,
    max_position_embeddings=128,
    **_IDS,
)
_DEC = _ENC | dict(num_key_value_heads=H)
_GPT = dict(vocab_size=V, n_embd=W, n_layer=L, n_head=H, n_positions=128, **_IDS)
_T5 = dict(vocab_size=V, d_model=W, num_layers=L, num_heads=H, d_ff=FF, d_kv=16, **_IDS)
_BART = dict(
    vocab_size=V,
    d_model=W,
    encoder_layers=L,
    decoder_layers=1,
    encoder_attention_heads=H,
    decoder_attention_heads=H,
    encoder_ffn_dim=FF,
    decoder_ffn_dim=FF,
    max_position_embeddings=128,
    decoder_start_token_id=1,
    **_IDS,
)
_MOE = dict(num_experts=4, num_experts_per_tok=2)

# family (config model_type) -> (config class name, tiny kwargs, kind)
FAMILIES: dict[str, tuple[str, dict, str]] = {
    # encoders whose token mixing reads the whole padded length
    "fnet": ("FNetConfig", _ENC, "encoder, Fourier mixing"),
    "convbert": ("ConvBertConfig", _ENC, "encoder, attention + span convolution"),
    "nystromformer": (
        "NystromformerConfig",
        _ENC | dict(num_landmarks=4, segment_means_seq_len=8),
        "encoder, Nyström attention",
    ),
    "yoso": ("YosoConfig", _ENC, "encoder, LSH-sampled attention"),
    "mra": ("MraConfig", _ENC | dict(block_per_row=2), "encoder, multi-resolution attention"),
    "reformer": (
        "ReformerConfig",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_attention_heads=H,
            attention_head_size=16,
            attn_layers=["local", "lsh"],
            feed_forward_size=FF,
            axial_pos_shape=[8, 16],
            axial_pos_embds_dim=[16, 16],
            max_position_embeddings=128,
            local_attn_chunk_length=8,
            lsh_attn_chunk_length=8,
            num_buckets=4,
            is_decoder=True,
            **_IDS,
        ),
        "decoder, LSH + local attention, reversible",
    ),
    "big_bird": ("BigBirdConfig", _ENC | dict(attention_type="original_full"), "encoder"),
    # encoders of other shapes
    "funnel": (
        "FunnelConfig",
        dict(
            vocab_size=V,
            d_model=W,
            n_head=H,
            d_head=16,
            d_inner=FF,
            block_sizes=[1, 1],
            block_repeats=[1, 1],
            architectures=["FunnelModel"],  # AutoModel picks among Funnel's two classes by it
            **_IDS,
        ),
        "encoder, pooled blocks",
    ),
    "squeezebert": (
        "SqueezeBertConfig",
        _ENC
        | dict(
            embedding_size=W,
            q_groups=1,
            k_groups=1,
            v_groups=1,
            post_attention_groups=1,
            intermediate_groups=1,
            output_groups=1,
        ),  # fmt: skip
        "encoder, grouped 1x1 convolutions",
    ),
    "mobilebert": (
        "MobileBertConfig",
        _ENC | dict(embedding_size=16, intra_bottleneck_size=16, num_feedforward_networks=2),
        "encoder, bottlenecks",
    ),
    "ibert": ("IBertConfig", _ENC, "encoder"),
    "ernie": ("ErnieConfig", _ENC, "encoder"),
    "esm": ("EsmConfig", _ENC | dict(position_embedding_type="rotary"), "encoder, rotary"),
    "rembert": (
        "RemBertConfig",
        _ENC | dict(input_embedding_size=16, output_embedding_size=16),
        "encoder, projected embeddings",
    ),  # fmt: skip
    "xlm-roberta-xl": ("XLMRobertaXLConfig", _ENC, "encoder, pre-LN"),
    "roberta-prelayernorm": ("RobertaPreLayerNormConfig", _ENC, "encoder, pre-LN"),
    "data2vec-text": ("Data2VecTextConfig", _ENC, "encoder"),
    "splinter": ("SplinterConfig", _ENC, "encoder"),
    "bert-generation": ("BertGenerationConfig", _ENC, "encoder"),
    "nomic_bert": ("NomicBertConfig", _ENC, "encoder, rotary"),
    "gte": ("GteConfig", _ENC, "encoder, rotary"),
    "eurobert": ("EuroBertConfig", _DEC, "encoder, rotary"),
    "xlm": (
        "XLMConfig",
        dict(vocab_size=V, emb_dim=W, n_layers=L, n_heads=H, max_position_embeddings=128, **_IDS),
        "encoder",
    ),
    "xlnet": (
        "XLNetConfig",
        dict(vocab_size=V, d_model=W, n_layer=L, n_head=H, d_inner=FF, **_IDS),
        "encoder, two streams, relative",
    ),
    "clip_text_model": ("CLIPTextConfig", _ENC, "text tower of a dual encoder, causal mask"),
    # decoders with self-computed attention
    "gptj": ("GPTJConfig", _GPT | dict(rotary_dim=8), "decoder, parallel block"),
    "gpt_neo": (
        "GPTNeoConfig",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_layers=L,
            num_heads=H,
            attention_types=[[["global", "local"], 1]],
            window_size=8,
            max_position_embeddings=128,
            **_IDS,
        ),
        "decoder, global + local attention",
    ),
    # CodeGen splits its fused qkv into 4 groups: 4 heads
    "codegen": (
        "CodeGenConfig",
        _GPT | dict(n_embd=64, n_head=4, rotary_dim=8, n_ctx=128),
        "decoder, parallel block",
    ),
    "gpt_bigcode": ("GPTBigCodeConfig", _GPT, "decoder, multi-query"),
    "ctrl": ("CTRLConfig", _GPT | dict(dff=FF), "decoder"),
    "openai-gpt": ("OpenAIGPTConfig", _GPT, "decoder, post-LN"),
    "biogpt": ("BioGptConfig", _ENC, "decoder"),
    "xglm": (
        "XGLMConfig",
        dict(vocab_size=V, d_model=W, num_layers=L, attention_heads=H, ffn_dim=FF, **_IDS),
        "decoder, sinusoidal",
    ),
    "persimmon": ("PersimmonConfig", _ENC, "decoder, partial rotary, q/k LayerNorm"),
    "nemotron": ("NemotronConfig", _DEC, "decoder, LayerNorm1P"),
    "diffllama": ("DiffLlamaConfig", _DEC, "decoder, differential attention"),
    "cohere2": ("Cohere2Config", _DEC | dict(sliding_window=8), "decoder, sliding + full"),
    "arcee": ("ArceeConfig", _DEC, "decoder"),
    "glm4": ("Glm4Config", _DEC | dict(head_dim=16), "decoder, sandwich norms"),
    "vaultgemma": ("VaultGemmaConfig", _DEC | dict(head_dim=16), "decoder"),
    "hunyuan_v1_dense": ("HunYuanDenseV1Config", _DEC | dict(head_dim=16), "decoder, q/k norms"),
    # mixtures of experts
    "olmoe": ("OlmoeConfig", _DEC | _MOE, "decoder, MoE"),
    "jetmoe": (
        "JetMoeConfig",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_hidden_layers=L,
            num_key_value_heads=H,
            kv_channels=16,
            intermediate_size=FF,
            num_local_experts=4,
            num_experts_per_tok=2,
            **_IDS,
        ),  # fmt: skip
        "decoder, MoE attention + MoE MLP",
    ),
    "phimoe": (
        "PhimoeConfig",
        _DEC | dict(num_local_experts=4, num_experts_per_tok=2),
        "decoder, MoE",
    ),  # fmt: skip
    "granitemoe": (
        "GraniteMoeConfig",
        _DEC | dict(num_local_experts=4, num_experts_per_tok=2),
        "decoder, MoE",
    ),
    "dbrx": (
        "DbrxConfig",
        dict(
            vocab_size=V,
            d_model=W,
            n_layers=L,
            n_heads=H,
            max_seq_len=128,
            attn_config={"kv_n_heads": H, "rope_theta": 10000.0, "clip_qkv": 8.0},
            ffn_config={"ffn_hidden_size": FF, "moe_num_experts": 4, "moe_top_k": 2},
            **_IDS,
        ),
        "decoder, MoE, fused qkv",
    ),
    # recurrent and hybrid
    "falcon_mamba": (
        "FalconMambaConfig",
        dict(vocab_size=V, hidden_size=W, num_hidden_layers=L, state_size=8, expand=2, **_IDS),
        "state-space (Mamba-1)",
    ),
    "xlstm": (
        "xLSTMConfig",
        dict(vocab_size=V, hidden_size=W, num_hidden_layers=L, num_heads=2, **_IDS),
        "recurrent (mLSTM)",
    ),
    # encoder-decoders (their encoder is read)
    "longt5": (
        "LongT5Config",
        _T5 | dict(encoder_attention_type="local", local_radius=4),
        "encoder-decoder, local attention",
    ),  # fmt: skip
    "umt5": ("UMT5Config", _T5, "encoder-decoder, relative buckets per layer"),
    "switch_transformers": (
        "SwitchTransformersConfig",
        _T5
        | dict(
            num_experts=4,
            encoder_sparse_step=1,
            decoder_sparse_step=1,
            num_sparse_encoder_layers=1,
            num_sparse_decoder_layers=1,
        ),  # fmt: skip
        "encoder-decoder, switch MoE",
    ),
    "blenderbot": ("BlenderbotConfig", _BART, "encoder-decoder, pre-LN"),
    "blenderbot-small": ("BlenderbotSmallConfig", _BART, "encoder-decoder"),
    "led": (
        "LEDConfig",
        _BART
        | dict(
            attention_window=[8, 8],
            max_encoder_position_embeddings=128,
            max_decoder_position_embeddings=128,
        ),  # fmt: skip
        "encoder-decoder, Longformer attention",
    ),
    "m2m_100": ("M2M100Config", _BART, "encoder-decoder, sinusoidal"),
    "plbart": ("PLBartConfig", _BART, "encoder-decoder"),
    "fsmt": (
        "FSMTConfig",
        _BART | dict(src_vocab_size=V, tgt_vocab_size=V, langs=["en", "de"]),
        "encoder-decoder, sequence-first states",
    ),
    "prophetnet": (
        "ProphetNetConfig",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_encoder_layers=L,
            num_decoder_layers=1,
            num_encoder_attention_heads=H,
            num_decoder_attention_heads=H,
            encoder_ffn_dim=FF,
            decoder_ffn_dim=FF,
            ngram=2,
            **_IDS,
        ),  # fmt: skip
        "encoder-decoder, n-gram stream decoder",
    ),
}


def config_of(family: str):
    import transformers

    cls_name, kwargs, _ = FAMILIES[family]
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


# What each family is expected to do beyond "read right": families whose real tokens move when a
# batch is padded (they run unpadded), and families refused at load, with the reason's words.
PAD_SENSITIVE = {"fnet", "convbert", "yoso", "nystromformer", "reformer"}
LOAD_REFUSED = {
    "mra": "mixes no tokens",  # its attention is zeros without its CUDA kernel
    "funnel": "pooled states that shorten the sequence",
}
# Families whose queries/keys view refuses, with the reason's words: layers that do not compute
# softmax attention over every pair of tokens (windows, blocks, hashed chunks, approximations, no
# attention at all), or a forward pass the model itself cannot run on these lengths. Every other
# family's queries/keys work.
_PARTIAL = "attend within windows, blocks or chunks of the text"
QK_REFUSED = {
    "fnet": "no attention layers",
    "falcon_mamba": "no attention layers",
    "xlstm": "no attention layers",
    "yoso": "form no softmax over token-by-token scores",  # LSH-sampled expectation
    "reformer": _PARTIAL,  # LSH buckets and local chunks
    "led": _PARTIAL,  # Longformer's sliding window
    "longt5": _PARTIAL,  # local blocks
    "nystromformer": "its own forward pass fails",  # it runs only at its segment length
}

# mixed lengths, 1 to 13 tokens with the zoo's word-level tokenizer
TEXTS = [
    "the cat sat on the w3 . w7 w9",
    "a dog",
    "w11 w12 w13 the cat on a dog ; w20 w21 w22 w23 !",
    "the w4 .",
    "w5 w6 w7 w8 w9 w10",
    "dog",
]
CHECKS = ("extraction", "norms", "int8", "massive + sinks", "queries/keys", "q/k before RoPE",
          "quant sites", "CLI massive")  # fmt: skip


def text_by_text(loaded):
    """Per-state means over every token, each text run alone through the model (no padding):
    the model's own states as isoscope numbers them (``residual_states``)."""
    import torch

    from isoscope.engine.extraction import residual_states, run_encoder

    total, count = 0.0, 0
    for text in TEXTS:
        ids = loaded.tokenizer(text, return_tensors="pt")["input_ids"]
        with torch.inference_mode():
            out = run_encoder(loaded, ids, torch.ones_like(ids), output_hidden_states=True)
        states = torch.stack(residual_states(out, loaded.encoder, ids.shape[1]))[:, 0].double()
        total = total + states.sum(1)
        count += ids.shape[1]
    return (total / count).numpy()


def causal_by_definition(loaded) -> bool:
    """The definition, on the states at the text's own positions (a model that pads the sequence
    itself, as Reformer does, has more): changing the last of 9 tokens moves no earlier one."""
    import torch

    from isoscope.engine.extraction import residual_states, run_encoder

    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 100, (1, 9), generator=gen)
    other = ids.clone()
    other[0, -1] = 5 if int(ids[0, -1]) != 5 else 6
    with torch.inference_mode():
        a, b = (
            residual_states(
                run_encoder(loaded, x, torch.ones_like(x), output_hidden_states=True),
                loaded.encoder,
                9,
            )
            for x in (ids, other)
        )
    return all(torch.allclose(x[:, :-1], y[:, :-1], atol=1e-5) for x, y in zip(a, b, strict=True))


def outcomes(family: str, folder: Path, tmp: Path) -> dict[str, str]:
    """Every check of one family: ``works``, ``refused: <the one line>``, ``wrong: <what>`` (a
    silently wrong number) or ``bug: <Type>: <line>`` (anything but a one-line refusal), plus
    ``load``, ``causal`` (``yes``/``no``, or ``WRONG`` against the definition) and ``padding``."""
    import numpy as np

    from isoscope.engine.errors import IsoscopeError
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import corpus_from_text
    from isoscope.engine.load.models import load_model
    from tests.zoo_checks import cli_smoke, run_analyses

    try:
        loaded = load_model(str(folder), device="cpu")
    except IsoscopeError as exc:
        return {"load": "refused: " + str(exc).splitlines()[0]}
    out = {"load": "works"}
    causal = loaded.info.is_causal
    try:
        agrees = causal == causal_by_definition(loaded)
    except Exception:  # the model's forward fails on the definition's 9 tokens
        agrees = None
    out["causal"] = ("yes" if causal else "no") + (
        "" if agrees else " (WRONG: not the definition)" if agrees is False else " (untested)"
    )
    out["padding"] = "harmless" if loaded.layout.pad_with_mask else "moves tokens: runs unpadded"
    try:
        truth = text_by_text(loaded)
        corpus = corpus_from_text("\n".join(TEXTS))
        errors = []
        for batch_size in (1, len(TEXTS)):
            settings = ExtractionSettings(max_length=32, batch_size=batch_size, sample_size=8)
            mean = extract(loaded, corpus, settings).mean
            errors.append(float(np.abs(mean - truth).max()) if mean.shape == truth.shape else 1e9)
        out["extraction"] = (
            "works" if max(errors) < 1e-5 else f"wrong: means off by {max(errors):.2g}"
        )
    except IsoscopeError as exc:
        out["extraction"] = "refused: " + str(exc).splitlines()[0]
    except Exception as exc:
        out["extraction"] = f"bug: {type(exc).__name__}: " + (str(exc).splitlines() or [""])[0]
    results = run_analyses(loaded, bugs_as_cells=True)
    no_attention = "attention" not in loaded.info.layer_pattern
    if no_attention and "without an attention input" in results["quant sites"]:
        results["quant sites"] = "works"  # no attention, so no attention-input site to find
    out.update({k: v for k, v in results.items() if k in CHECKS})
    try:
        rc, line = cli_smoke(folder, tmp)
        out["CLI massive"] = "works" if rc == 0 else f"{'refused' if rc == 2 else 'bug'}: {line}"
    except Exception as exc:
        out["CLI massive"] = f"bug: {type(exc).__name__}: " + (str(exc).splitlines() or [""])[0]
    return out
