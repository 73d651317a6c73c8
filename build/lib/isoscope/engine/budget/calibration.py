"""A short timed run of a few of a model's layers, before its load: how fast this device runs
that model's width, when its records do not say (:mod:`isoscope.engine.budget.estimates`).

A CPU's rate per padded token x parameter grows with size at its own pace (its caches, its
vector units, its memory), so extrapolating a device's records of small models with another
machine's growth can be off by half. When the records do not span enough sizes, the estimate
measures instead: a random-init copy of the target's architecture (its config, read from the
checkpoint's ``config.json`` or a GGUF's metadata) cut to :data:`CALIBRATION_LAYERS` layers and a
small vocabulary (the embedding lookup costs nothing per parameter) runs a batch shaped as the
extraction's (its texts, the corpus's mean padded width), timed, within about
:data:`CALIBRATION_SECONDS` (:func:`calibrate`). The layers' seconds per padded token x the
target's depth / the layers run, plus the rest of the pass once, is the whole model's seconds
per padded token (every layer of a decoder or encoder stack has the same shape).

The result is kept in the speed records under the device and the shape (:func:`shape_key`), so
a shape is measured once per device; the estimate then reads it as it reads any record
(:func:`isoscope.engine.budget.throughput.extraction_rate`).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

CALIBRATION_LAYERS = 2  # layers run: two, so the second reads the first's output as in the model
# A slice's parameters (a layer holds about 12 x width^2: attention 4, feed-forward 8): two
# layers up to the first, one up to the second; a model whose one layer is bigger is not
# calibrated (its random init alone would cost more than the estimate is worth)
TWO_LAYER_PARAMETERS = 10**8
MAX_SLICE_PARAMETERS = 4 * 10**8
LAYER_PARAMETERS_PER_WIDTH2 = 12
CALIBRATION_SECONDS = 1.5  # the timed batch at most; two small passes come before it
CALIBRATION_VOCAB = 512  # the slice's vocabulary: the embedding's size does not change the rate
MAX_CALIBRATION_TEXTS = 32  # the timed batch's texts when not told (the default batch size)
WARM_UP_TEXTS = 4  # the texts of the passes before the timed batch


@dataclass(frozen=True)
class Shape:
    """What a calibration needs of a model: its config (``transformers.PretrainedConfig``), its
    depth and its width, read from the checkpoint before the weights."""

    config: object
    layers: int
    width: int

    @property
    def key(self) -> str:
        """What a calibration is kept under (:func:`shape_key`)."""
        return shape_key(self.config)

    @property
    def run_layers(self) -> int:
        """Layers the calibration runs: :data:`CALIBRATION_LAYERS` up to
        :data:`TWO_LAYER_PARAMETERS`, one up to :data:`MAX_SLICE_PARAMETERS`, else 0 (too wide
        to calibrate); never more than the model has."""
        per_layer = LAYER_PARAMETERS_PER_WIDTH2 * self.width**2
        if CALIBRATION_LAYERS * per_layer <= TWO_LAYER_PARAMETERS:
            return min(CALIBRATION_LAYERS, self.layers)
        return min(1, self.layers) if per_layer <= MAX_SLICE_PARAMETERS else 0

    @property
    def basis(self) -> str:
        """The estimate's wording of a rate taken from this shape's calibration."""
        return f"from a {self.run_layers}-layer calibration at the model's width"


def shape_key(config) -> str:
    """``qwen2 · width 896 · depth 24 · ffn 4864 · heads 14/2``: the facts of a config that set
    the cost per token (the same for a checkpoint's ``config.json``, a GGUF's metadata and the
    loaded model's config, so a calibration before a load is found after it)."""
    facts = [
        getattr(config, "model_type", "") or "model",
        f"width {getattr(config, 'hidden_size', 0)}",
        f"depth {getattr(config, 'num_hidden_layers', 0)}",
        f"ffn {getattr(config, 'intermediate_size', 0)}",
        f"heads {getattr(config, 'num_attention_heads', 0)}/"
        f"{getattr(config, 'num_key_value_heads', None) or getattr(config, 'num_attention_heads', 0)}",
    ]
    return " · ".join(facts)


def shape_of_config(config) -> Shape | None:
    """The :class:`Shape` of a config with a layer count and a width; None otherwise."""
    layers = getattr(config, "num_hidden_layers", None)
    width = getattr(config, "hidden_size", None)
    if not isinstance(layers, int) or not isinstance(width, int) or layers <= 0 or width <= 0:
        return None
    return Shape(config, layers, width)


def folder_shape(folder: Path) -> Shape | None:
    """The :class:`Shape` of a checkpoint folder (its ``config.json``, never remote code) or of a
    ``.gguf`` file (its metadata, without reading a tensor or the vocabulary); None when neither
    says (the estimate then keeps to the records)."""
    folder = Path(folder)
    try:
        if folder.suffix.lower() == ".gguf" and folder.is_file():
            return shape_of_config(gguf_config(folder))
        if (folder / "config.json").is_file():
            from transformers import AutoConfig

            return shape_of_config(AutoConfig.from_pretrained(str(folder)))
    except Exception:
        return None
    return None


def gguf_config(path: Path):
    """A GGUF file's config from its metadata keys (transformers' GGUF key mapping), or None
    for an architecture transformers does not map."""
    from transformers import AutoConfig
    from transformers.integrations.gguf.reader import read_gguf_metadata
    from transformers.modeling_gguf_pytorch_utils import GGUF_CONFIG_MAPPING

    metadata, _ = read_gguf_metadata(str(path))
    architecture = str(metadata.get("general.architecture", ""))
    # transformers' table of tables is inferred as dict[str, object]: each is GGUF key -> field
    mapping = cast("dict[str, str | None] | None", GGUF_CONFIG_MAPPING.get(architecture))
    if not mapping:
        return None
    prefix = architecture + "."
    fields = {}
    for key, value in metadata.items():
        name = mapping.get(key.removeprefix(prefix)) if key.startswith(prefix) else None
        if name:
            fields[name] = value
    return AutoConfig.for_model(architecture, **fields)


def slice_config(shape: Shape):
    """The config of the calibration's model: ``shape``'s, cut to :attr:`Shape.run_layers`
    layers (per-layer lists cut with it) and :data:`CALIBRATION_VOCAB` tokens."""
    config: Any = copy.deepcopy(shape.config)  # a PretrainedConfig: its fields are set by name
    layers = shape.run_layers
    for name, value in list(vars(config).items()):
        if isinstance(value, list) and len(value) == shape.layers:  # one entry per layer
            setattr(config, name, value[:layers])
    config.num_hidden_layers = layers
    config.vocab_size = CALIBRATION_VOCAB
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value >= CALIBRATION_VOCAB:
            setattr(config, name, 0)
    return config


def layer_list(model, layers: int):
    """The slice's stack of layers: the first module list of ``layers`` modules of one class
    (``model.layers``, ``encoder.layer``, ``h``...), found in the module tree, not by name; None
    when there is none."""
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == layers:
            if len({type(child) for child in module}) == 1:
                return module
    return None


def calibrate(
    shape: Shape,
    device: str,
    length: int,
    texts: int = MAX_CALIBRATION_TEXTS,
    budget_s: float = CALIBRATION_SECONDS,
) -> float | None:
    """Seconds per padded token of the whole model of ``shape`` on ``device`` in batches of
    ``texts`` texts of ``length`` tokens (the extraction's), from a random-init slice (module
    doc); None when the slice cannot be built or run (the estimate then keeps to the records).

    A batch's rows share each matrix product, so a batch of one text runs several times slower
    per token than the extraction's: the timed batch has the extraction's ``texts`` rows, fewer
    only where that would exceed ``budget_s`` (sized by a pass of :data:`WARM_UP_TEXTS` after an
    untimed one; a model too wide for more is timed on that pass; a batch under half the budget is
    timed twice and the faster kept). The layers are timed apart
    (hooks on the stack of layers) and only their seconds are scaled to the model's depth: the
    embedding, the attention mask and the outputs cost once a batch, whatever the depth."""
    if shape.run_layers < 1:
        return None
    try:
        import torch
        from transformers import AutoModel

        torch.manual_seed(0)
        model = AutoModel.from_config(slice_config(shape), dtype=torch.float32)
        model = model.to(device).eval()
        length, texts = max(1, int(length)), max(1, int(texts))
        in_layers = [0.0, 0.0]  # seconds inside the layers, the current layer's start

        def start(module, args) -> None:
            in_layers[1] = time.perf_counter()

        def stop(module, args, output) -> None:
            in_layers[0] += time.perf_counter() - in_layers[1]

        stack = layer_list(model, shape.run_layers)
        for layer in () if stack is None else stack:
            layer.register_forward_pre_hook(start)
            layer.register_forward_hook(stop)

        def run(rows: int) -> tuple[float, float]:
            ids = torch.randint(1, CALIBRATION_VOCAB, (rows, length), device=device)
            mask = torch.ones_like(ids)
            in_layers[0] = 0.0
            started = time.perf_counter()
            with torch.inference_mode():
                model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
            if str(device).startswith("cuda"):
                torch.cuda.synchronize()
            total = time.perf_counter() - started
            return total, (in_layers[0] if stack is not None else total)

        warm = min(WARM_UP_TEXTS, texts)
        run(warm)  # the first pass allocates and picks kernels: not timed
        total, layers_s = run(warm)  # sizes the timed batch: a row costs less in a larger one
        rows = texts if total * texts / warm <= budget_s else int(texts * budget_s * warm / total)
        rows = max(warm, min(texts, rows))
        if rows > warm:
            total, layers_s = run(rows)
        if total <= budget_s / 2:  # cheap enough to time twice: the faster one, as less disturbed
            total, layers_s = min((total, layers_s), run(rows))
    except Exception:
        return None
    tokens = rows * length
    return (total - layers_s) / tokens + layers_s / tokens * shape.layers / shape.run_layers
