"""Tiny random checkpoints (2 layers, width 64) of every decoder, encoder and text encoder-decoder
family transformers builds from a small config: the conformance zoo (``tests/integration/engine/test_zoo.py``) and
``benchmarks/zoo_table.py``.

Each family is a config class name and the keyword arguments that make it tiny; :func:`build`
saves a seeded random model with a small tokenizer to a folder, which isoscope's real loader
(``isoscope.engine.load.models.load_model``) then reads like any checkpoint.
"""

from __future__ import annotations

from pathlib import Path

W, L, H, KV, FF, V = 64, 2, 4, 2, 128, 128

_DEC = dict(
    vocab_size=V,
    hidden_size=W,
    num_hidden_layers=L,
    num_attention_heads=H,
    num_key_value_heads=KV,
    intermediate_size=FF,
    max_position_embeddings=128,
)
_ENC = dict(
    vocab_size=V,
    hidden_size=W,
    num_hidden_layers=L,
    num_attention_heads=H,
    intermediate_size=FF,
    max_position_embeddings=128,
)
_MOE = dict(num_local_experts=4, num_experts_per_tok=2)
_T5 = dict(vocab_size=V, d_model=W, num_layers=L, num_heads=H, d_ff=FF, d_kv=16, pad_token_id=0)
_BART = dict(  # BART, mBART, Marian, Pegasus: one encoder layer count, one decoder layer count
    vocab_size=V,
    d_model=W,
    encoder_layers=L,
    decoder_layers=1,
    encoder_attention_heads=H,
    decoder_attention_heads=H,
    encoder_ffn_dim=FF,
    decoder_ffn_dim=FF,
    max_position_embeddings=128,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
    decoder_start_token_id=1,
)

# family (config model_type) -> (config class name, tiny kwargs, decoder?)
FAMILIES: dict[str, tuple[str, dict, bool]] = {
    "llama": ("LlamaConfig", _DEC, True),
    "mistral": ("MistralConfig", _DEC, True),
    "mixtral": ("MixtralConfig", _DEC | _MOE, True),
    "qwen2": ("Qwen2Config", _DEC, True),
    "qwen2_moe": (
        "Qwen2MoeConfig",
        _DEC
        | dict(
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=64,
        ),
        True,
    ),
    "qwen3": ("Qwen3Config", _DEC | dict(head_dim=16), True),
    "qwen3_moe": (
        "Qwen3MoeConfig",
        _DEC | dict(head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32),
        True,
    ),
    "gemma": ("GemmaConfig", _DEC | dict(head_dim=16), True),
    "gemma2": ("Gemma2Config", _DEC | dict(head_dim=16), True),
    "gemma3_text": ("Gemma3TextConfig", _DEC | dict(head_dim=16, sliding_window=16), True),
    "phi": ("PhiConfig", _DEC, True),
    "phi3": ("Phi3Config", _DEC | dict(pad_token_id=0), True),
    "olmo": ("OlmoConfig", _DEC | dict(pad_token_id=0), True),
    "olmo2": ("Olmo2Config", _DEC | dict(pad_token_id=0), True),
    "granite": ("GraniteConfig", _DEC, True),
    "cohere": ("CohereConfig", _DEC | dict(pad_token_id=0), True),
    "starcoder2": ("Starcoder2Config", _DEC, True),
    "stablelm": ("StableLmConfig", _DEC, True),
    "gpt_neox": (
        "GPTNeoXConfig",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_hidden_layers=L,
            num_attention_heads=H,
            intermediate_size=FF,
            max_position_embeddings=128,
        ),
        True,
    ),
    "gpt2": (
        "GPT2Config",
        dict(
            vocab_size=V,
            n_embd=W,
            n_layer=L,
            n_head=H,
            n_positions=128,
            bos_token_id=0,
            eos_token_id=0,
        ),
        True,
    ),
    "opt": (
        "OPTConfig",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_hidden_layers=L,
            num_attention_heads=H,
            ffn_dim=FF,
            word_embed_proj_dim=W,
            max_position_embeddings=128,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=0,
        ),
        True,
    ),
    "bloom": ("BloomConfig", dict(vocab_size=V, hidden_size=W, n_layer=L, n_head=H), True),
    "falcon": (
        "FalconConfig",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_hidden_layers=L,
            num_attention_heads=H,
            new_decoder_architecture=False,
        ),
        True,
    ),
    "mpt": (
        "MptConfig",
        dict(vocab_size=V, d_model=W, n_layers=L, n_heads=H, max_seq_len=128),
        True,
    ),
    "smollm3": ("SmolLM3Config", _DEC | dict(pad_token_id=0), True),
    "glm": ("GlmConfig", _DEC | dict(head_dim=16, pad_token_id=0), True),
    "exaone4": ("Exaone4Config", _DEC | dict(sliding_window=16), True),
    "ernie4_5": ("Ernie4_5Config", _DEC | dict(head_dim=16), True),
    "helium": ("HeliumConfig", _DEC | dict(head_dim=16), True),
    "gpt_oss": (
        "GptOssConfig",
        _DEC | dict(head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=16),
        True,
    ),
    "llama4_text": (
        "Llama4TextConfig",
        _DEC
        | dict(
            head_dim=16,
            intermediate_size_mlp=FF,
            num_local_experts=2,
            num_experts_per_tok=1,
            interleave_moe_layer_step=1,
        ),
        True,
    ),
    "seed_oss": ("SeedOssConfig", _DEC | dict(head_dim=16), True),
    "apertus": ("ApertusConfig", _DEC | dict(head_dim=16), True),
    "olmo3": ("Olmo3Config", _DEC | dict(pad_token_id=0, sliding_window=16), True),
    "bert": ("BertConfig", _ENC, False),
    "roberta": ("RobertaConfig", _ENC | dict(pad_token_id=1), False),
    "xlm-roberta": ("XLMRobertaConfig", _ENC | dict(pad_token_id=1), False),
    "camembert": ("CamembertConfig", _ENC | dict(pad_token_id=1), False),
    "deberta-v2": ("DebertaV2Config", _ENC | dict(relative_attention=True), False),
    "deberta": ("DebertaConfig", _ENC | dict(relative_attention=True), False),
    "electra": ("ElectraConfig", _ENC | dict(embedding_size=32), False),
    "distilbert": (
        "DistilBertConfig",
        dict(
            vocab_size=V, dim=W, n_layers=L, n_heads=H, hidden_dim=FF, max_position_embeddings=128
        ),
        False,
    ),
    "albert": ("AlbertConfig", _ENC | dict(embedding_size=32), False),
    "mpnet": ("MPNetConfig", _ENC | dict(pad_token_id=1), False),
    "modernbert": (
        "ModernBertConfig",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_hidden_layers=L,
            num_attention_heads=H,
            intermediate_size=FF,
            max_position_embeddings=128,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            cls_token_id=1,
            sep_token_id=2,
        ),
        False,
    ),
    "megatron-bert": ("MegatronBertConfig", _ENC, False),
    "roformer": ("RoFormerConfig", _ENC | dict(embedding_size=W), False),
    # text encoder-decoders: the loader keeps the encoder (get_encoder()), an encoder like the others
    "t5": ("T5Config", _T5, False),
    "mt5": ("MT5Config", _T5, False),  # gated-GELU feed-forward, Flan-T5's layout
    "bart": ("BartConfig", _BART, False),
    "mbart": ("MBartConfig", _BART, False),
    "marian": ("MarianConfig", _BART, False),
    "pegasus": ("PegasusConfig", _BART, False),
    # the speech encoder-decoder: its encoder reads log-mel features (build saves a 2 s extractor)
    "whisper": (
        "WhisperConfig",
        {k: v for k, v in _BART.items() if k != "max_position_embeddings"}
        | dict(num_mel_bins=16, max_source_positions=100, max_target_positions=32),
        False,
    ),
}
ENCODER_DECODERS = ("t5", "mt5", "bart", "mbart", "marian", "pegasus", "whisper")
AUDIO = ("whisper",)
TEXT_FAMILIES = tuple(k for k in FAMILIES if k not in AUDIO)

DECODERS = tuple(k for k, (_, _, dec) in FAMILIES.items() if dec)
ENCODERS = tuple(k for k, (_, _, dec) in FAMILIES.items() if not dec)


def config_of(family: str):
    import transformers

    cls_name, kwargs, _ = FAMILIES[family]
    return getattr(transformers, cls_name)(**kwargs)


def tokenizer(vocab_size: int = V):
    """A small word-level fast tokenizer with special tokens, built offline."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<unk>", "<mask>"]
    words = [f"w{i}" for i in range(vocab_size - len(specials) - 12)]
    words += list(".,!?;:") + ["the", "a", "cat", "dog", "sat", "on"]
    vocab = {t: i for i, t in enumerate(specials + words)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        mask_token="<mask>",
        cls_token="<s>",
        sep_token="</s>",
    )


def build(family: str, folder: Path, seed: int = 0) -> Path:
    """Save a seeded random ``family`` base model (safetensors) and the tokenizer to ``folder``."""
    import torch
    from transformers import AutoModel

    torch.manual_seed(seed)
    model = AutoModel.from_config(config_of(family))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer().save_pretrained(folder)  # Whisper's folder too: a tokenizer for its decoder
    if family in AUDIO:
        from transformers import WhisperFeatureExtractor

        config = model.config  # 100 encoder frames = 200 mel frames of 160 samples: 2 s at 16 kHz
        seconds = config.max_source_positions * 2 * 160 // 16000
        WhisperFeatureExtractor(
            feature_size=config.num_mel_bins, hop_length=160, chunk_length=seconds
        ).save_pretrained(folder)
    return folder
