"""The ``random:`` factory: a randomly initialised model of one row of
:data:`isoscope.engine.load.source.RANDOM_FAMILIES` (seeded), with the bundled tokenizer or a default
image / audio processor."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from isoscope.engine import arch
from isoscope.engine.errors import ModelLoadError
from isoscope.engine.load.checkpoints import bundled_tokenizer, default_model_dir
from isoscope.engine.load.model_parts import ModelParts
from isoscope.engine.load.source import RANDOM_FAMILIES, ModelSource

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def build_random_model(
    family: str, options: dict[str, float], vocab_size: int, *, head: str = "base"
) -> torch.nn.Module:
    """A randomly initialised model of ``family`` (a row of :data:`RANDOM_FAMILIES`, seeded);
    a family without positions has its table zeroed and frozen."""
    from transformers import (
        AutoConfig,
        BertConfig,
        BertForMaskedLM,
        BertModel,
        GPT2Config,
        GPT2Model,
    )

    layers = int(options.get("layers", 4))
    width = int(options.get("width", 256))
    heads = int(options.get("heads", 4))
    seed = int(options.get("seed", 0))
    init_std = float(options.get("init_std", 0.02))
    if layers < 1 or width < 1 or heads < 1 or width % heads:
        raise ModelLoadError(
            "random model needs layers, width, heads >= 1 and width "
            f"divisible by heads (got {layers}, {width}, {heads})"
        )
    row = RANDOM_FAMILIES[family]
    torch.manual_seed(seed)
    if row.modality != "text":
        return _random_media_model(row.builds, layers, width, heads, init_std)
    model: PreTrainedModel
    if row.builds == "default":
        config = AutoConfig.from_pretrained(default_model_dir(), local_files_only=True)
        config.initializer_range = init_std
        model = (BertForMaskedLM if head == "mlm" else BertModel)(config)
    elif row.builds == "bert":
        assert row.max_positions is not None  # a bert or gpt2 row names its default length
        config = BertConfig(
            vocab_size=vocab_size,
            hidden_size=width,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=4 * width,
            max_position_embeddings=int(options.get("max_positions", row.max_positions)),
            initializer_range=init_std,
        )
        model = (BertForMaskedLM if head == "mlm" else BertModel)(config)
    else:
        if head == "mlm":
            raise ModelLoadError("random GPT-2 models are causal and have no masked-LM head")
        assert row.max_positions is not None
        config = GPT2Config(
            vocab_size=vocab_size,
            n_embd=width,
            n_layer=layers,
            n_head=heads,
            n_positions=int(options.get("max_positions", row.max_positions)),
            initializer_range=init_std,
            bos_token_id=None,
            eos_token_id=None,  # GPT-2's 50256 lies outside other vocabularies
        )
        model = GPT2Model(config)
    if row.positions == "none":
        table = arch.position_table(model)  # zeroed and frozen below
        assert table is not None
        with torch.no_grad():
            table.weight.zero_()
        table.weight.requires_grad_(False)
        model.config.isoscope_nope = True
    return model


def _random_media_model(
    family: str, layers: int, width: int, heads: int, init_std: float
) -> torch.nn.Module:
    from transformers import ViTConfig, ViTModel, Wav2Vec2Config, Wav2Vec2Model

    common: dict[str, Any] = {
        "hidden_size": width,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": 4 * width,
        "initializer_range": init_std,
    }
    if family == "vit":
        return ViTModel(ViTConfig(image_size=224, patch_size=16, **common), add_pooling_layer=False)
    return Wav2Vec2Model(
        Wav2Vec2Config(feat_extract_norm="layer", do_stable_layer_norm=True, **common)
    )


def random_processor(family: str) -> Any:
    """The default processor of a ``random:vit`` / ``random:wav2vec2`` model (built here)."""
    if family == "vit":
        from transformers import ViTImageProcessor

        return ViTImageProcessor()
    from transformers import Wav2Vec2FeatureExtractor

    return Wav2Vec2FeatureExtractor(return_attention_mask=True)


def random_census(
    family: str, options: dict[str, float], vocab_size: int, *, head: str = "base"
) -> dict[str, int]:
    """Parameters of the model :func:`build_random_model` would build (position tables, heads and
    embeddings included), counted on the meta device: the model's own modules, no memory. The
    memory preflight weighs a ``random:`` model with this before it is built."""
    with torch.device("meta"):
        model = build_random_model(family, options, vocab_size, head=head)
    return {"F32": sum(p.numel() for p in model.parameters())}


def read_random(
    source: ModelSource,
    *,
    head: str,
    check: Callable[[dict[str, int]], None] | None = None,
) -> ModelParts:
    """A ``random:FAMILY:opts`` source as :class:`ModelParts`, fingerprinted by its canonical text.
    ``check`` gets the parameter census (:func:`random_census`) before the model is built and may
    refuse it (the memory preflight)."""
    assert source.family is not None
    family, options, canonical = source.family.name, source.option_dict, source.text
    media = source.family.modality != "text"
    if media and head != "base":
        raise ModelLoadError(f"random {family} models have no masked-LM head; use head 'base'")
    tokenizer = None if media else bundled_tokenizer()
    processor = random_processor(family) if media else None
    vocab_size = 0 if tokenizer is None else len(tokenizer)
    if check is not None:
        check(random_census(family, options, vocab_size, head=head))
    model = build_random_model(family, options, vocab_size, head=head)
    fingerprint = hashlib.sha256(f"{canonical}|{head}".encode()).hexdigest()[:20]
    config: Any = model.config
    return ModelParts(
        model=model,
        tokenizer=tokenizer,
        source=canonical,
        display=f"random-init {family} ({config.num_hidden_layers} layers, width {config.hidden_size})",
        fingerprint=fingerprint,
        random=True,
        spec={"source": canonical, "head": head},
        processor=processor,
    )
