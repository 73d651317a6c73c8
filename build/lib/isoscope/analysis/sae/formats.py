"""Released sparse autoencoders read from their files: three formats, safetensors only.

- **Gemma Scope / Gemma Scope 2** (Lieberum et al. 2024, arXiv 2408.05147): a folder with
  ``params.safetensors`` holding ``w_enc`` (d, m), ``w_dec`` (m, d), ``b_enc``, ``b_dec`` and
  ``threshold`` (JumpReLU; any capitalisation), and for Gemma Scope 2 often a ``config.json``
  naming the hook point (``hf_hook_point_in``: ``model.layers.12.output``). The encoder reads x
  as it is (no ``b_dec`` subtracted), as the release's own code does.
- **SAELens** (``cfg.json`` + ``sae_weights.safetensors``): ``W_enc`` (d, m), ``W_dec`` (m, d),
  ``b_enc``, ``b_dec``, and ``threshold`` (or ``log_threshold``) for JumpReLU; the config names
  the architecture (standard = ReLU, ``topk`` with ``k``, ``jumprelu``), the hook
  (``hook_name``, at the top or under ``metadata``), ``apply_b_dec_to_input`` and
  ``normalize_activations``.
- **EleutherAI sparsify** (``cfg.json`` + ``sae.safetensors``): ``encoder.weight`` (m, d),
  ``encoder.bias``, ``W_dec`` (m, d), ``b_dec``; TopK with the config's ``k``; the hook is the
  folder's name (``layers.12``: the output of layer 12, ``embed_tokens``: the embeddings).

Hooks map onto isoscope's states (``emb`` = 0, layer i's output = i): the residual stream
after block i (``blocks.i.hook_resid_post``, ``model.layers.i.output``, ``layers.i``) is state
i + 1; before block i (``blocks.i.hook_resid_pre``) is state i; the embeddings are state 0.
Any other site (attention or MLP outputs, transcoders) is refused in one line: isoscope's states
are the residual stream. Pickle files (``.pt``, ``.pth``, ``.bin``, ``.ckpt``, ``.pkl``) and
numpy archives are never read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from isoscope.engine.errors import ModelLoadError

GEMMA_SCOPE_FILE = "params.safetensors"
SAELENS_FILES = ("cfg.json", "sae_weights.safetensors")
SPARSIFY_FILES = ("cfg.json", "sae.safetensors")
REFUSED_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".pkl", ".npz", ".npy")
ACTIVATIONS = ("relu", "topk", "jumprelu")
# How an SAE normalises x before encoding (SAELens's ``normalize_activations``): none; a fixed
# factor (``scale``); per token to norm sqrt(d) (``constant_norm_rescale``); per token to zero
# mean and unit standard deviation (``layer_norm``). The reconstruction is mapped back.
NORMALISATIONS = ("none", "scale", "constant_norm_rescale", "layer_norm")

_RESID_POST = (
    re.compile(r"^blocks\.(\d+)\.hook_resid_post$"),
    re.compile(r"^(?:model\.)?(?:language_model\.)?(?:model\.)?layers[._](\d+)(?:\.output)?$"),
)
_RESID_PRE = (
    re.compile(r"^blocks\.(\d+)\.hook_resid_pre$"),
    re.compile(r"^(?:model\.)?(?:language_model\.)?(?:model\.)?layers[._](\d+)\.input$"),
)
_EMBEDDINGS = ("hook_embed", "embed_tokens", "model.embed_tokens", "embedding", "embeddings")


@dataclass(frozen=True)
class SparseAutoencoder:
    """One SAE's weights (float32, on ``w_enc.device``) and what its files say about it.

    ``w_enc`` (d, m), ``w_dec`` (m, d): one decoder row per feature; ``b_enc`` (m,), ``b_dec``
    (d,); ``threshold`` (m,) for JumpReLU, ``k`` for TopK. ``subtract_b_dec``: the encoder reads
    x - b_dec (SAELens's ``apply_b_dec_to_input``). ``normalise``/``input_scale``: see
    :data:`NORMALISATIONS`. ``hook``: the site as the files name it; ``state``: the isoscope
    state it maps to (None when the files do not say). ``source``: the SAE's source text.
    """

    w_enc: torch.Tensor
    w_dec: torch.Tensor
    b_enc: torch.Tensor
    b_dec: torch.Tensor
    activation: str
    format: str
    threshold: torch.Tensor | None = None
    k: int | None = None
    subtract_b_dec: bool = True
    normalise: str = "none"
    input_scale: float = 1.0
    hook: str = ""
    state: int | None = None
    source: str = ""
    model_name: str = ""
    neuronpedia_id: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def d_in(self) -> int:
        return int(self.w_enc.shape[0])

    @property
    def width(self) -> int:
        """m: the number of features."""
        return int(self.w_enc.shape[1])

    @property
    def device(self) -> torch.device:
        return self.w_enc.device

    def to(self, device: torch.device | str) -> SparseAutoencoder:
        """The same SAE with its tensors on ``device`` (float32)."""
        move = {
            name: getattr(self, name).to(device, torch.float32)
            for name in ("w_enc", "w_dec", "b_enc", "b_dec", "threshold")
            if getattr(self, name) is not None
        }
        return replace(self, **move)

    def describe(self) -> dict[str, Any]:
        """The SAE as the CLI's JSON and the page's caption name it."""
        return {
            "source": self.source,
            "format": self.format,
            "activation": self.activation,
            "k": self.k,
            "width": self.width,
            "d_in": self.d_in,
            "hook": self.hook,
            "normalise": self.normalise,
            "input_scale": self.input_scale,
            "subtract_b_dec": self.subtract_b_dec,
            "model_name": self.model_name,
            "neuronpedia_id": self.neuronpedia_id or None,
        }


def hook_state(hook: str) -> int | None:
    """The isoscope state a residual-stream hook names (see the module doc): None for an empty
    hook; :class:`ModelLoadError` for a site that is not a hidden state."""
    hook = (hook or "").strip()
    if not hook:
        return None
    for pattern in _RESID_POST:
        if m := pattern.match(hook):
            return int(m[1]) + 1
    for pattern in _RESID_PRE:
        if m := pattern.match(hook):
            return int(m[1])
    if hook in _EMBEDDINGS:
        return 0
    raise ModelLoadError(
        f"the SAE reads {hook!r}, which is not a residual-stream hidden state; isoscope compares "
        "SAEs trained on the residual stream (resid_pre / resid_post, layers.N): pick one of those"
    )


def refuse_pickle(folder: Path) -> None:
    """:class:`ModelLoadError` when ``folder`` holds SAE weights only in a format that is not
    safetensors (pickle can run code when loaded)."""
    refused = sorted(p.name for p in folder.iterdir() if p.suffix.lower() in REFUSED_SUFFIXES)
    if refused:
        raise ModelLoadError(
            f"{folder} holds SAE weights only as {refused[0]} (pickle or numpy), which isoscope "
            "never reads: pick an SAE with safetensors files (params.safetensors, "
            "sae_weights.safetensors or sae.safetensors)"
        )


def read_folder(folder: Path, *, path_hint: str = "", source: str = "") -> SparseAutoencoder:
    """The SAE in ``folder`` (a file in it: its folder), whichever of the three formats it is
    in; ``path_hint`` is its path inside a Hub repo (plus the repo id), which Gemma Scope's
    hook is read from when no config names it."""
    folder = Path(folder)
    if folder.is_file():
        if folder.suffix.lower() in REFUSED_SUFFIXES:
            refuse_pickle(folder.parent)
        folder = folder.parent
    if not folder.is_dir():
        raise ModelLoadError(
            f"no SAE at {str(folder)!r}: give a folder holding params.safetensors (Gemma Scope), "
            "cfg.json + sae_weights.safetensors (SAELens) or cfg.json + sae.safetensors (sparsify)"
        )
    hint = path_hint or str(folder)
    if (folder / GEMMA_SCOPE_FILE).is_file():
        sae = _gemma_scope(folder, hint)
    elif all((folder / n).is_file() for n in SAELENS_FILES):
        sae = _saelens(folder)
    elif all((folder / n).is_file() for n in SPARSIFY_FILES):
        sae = _sparsify(folder, hint)
    else:
        refuse_pickle(folder)
        raise ModelLoadError(
            f"{str(folder)!r} holds no SAE isoscope reads: expected params.safetensors (Gemma "
            "Scope), cfg.json + sae_weights.safetensors (SAELens) or cfg.json + sae.safetensors "
            "(sparsify)"
        )
    _check_shapes(sae)
    return replace(sae, source=source or str(folder))


def _tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return {k: v.to(torch.float32) for k, v in load_file(str(path)).items()}
    except (SafetensorError, OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot read {path.name}: {exc}") from None


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        raise ModelLoadError(f"{path} is not readable JSON") from None
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path} is not a JSON object")
    return data


def _pick(tensors: dict[str, torch.Tensor], *names: str, file: str) -> torch.Tensor:
    lower = {k.lower(): v for k, v in tensors.items()}
    for name in names:
        if name.lower() in lower:
            return lower[name.lower()]
    raise ModelLoadError(f"{file} has no {names[0]} tensor (it has {', '.join(sorted(tensors))})")


def _gemma_scope(folder: Path, hint: str) -> SparseAutoencoder:
    tensors = _tensors(folder / GEMMA_SCOPE_FILE)
    pick = {"file": GEMMA_SCOPE_FILE}
    config = _json(folder / "config.json") if (folder / "config.json").is_file() else {}
    hook = str(config.get("hf_hook_point_in") or config.get("hook_name") or "")
    if not hook:
        hook = _gemma_scope_hook(hint)
    architecture = str(config.get("architecture", "jump_relu")).replace("_", "")
    if architecture != "jumprelu":
        raise ModelLoadError(f"Gemma Scope SAE with architecture {architecture!r}: only JumpReLU")
    return SparseAutoencoder(
        w_enc=_pick(tensors, "w_enc", **pick),
        w_dec=_pick(tensors, "w_dec", **pick),
        b_enc=_pick(tensors, "b_enc", **pick),
        b_dec=_pick(tensors, "b_dec", **pick),
        threshold=_pick(tensors, "threshold", **pick),
        activation="jumprelu",
        format="gemma-scope",
        subtract_b_dec=False,
        hook=hook,
        state=hook_state(hook),
        model_name=str(config.get("model_name", "")),
    )


def _gemma_scope_hook(hint: str) -> str:
    """Gemma Scope's site from its path when no config names it: ``resid_post/layer_12_...``
    (Gemma Scope 2) or a ``-res`` repo's ``layer_12/width_16k/...`` (Gemma Scope) is the output
    of layer 12; an attention, MLP or transcoder path is named as such (and refused)."""
    low = hint.lower()
    layer = re.search(r"layer_(\d+)", low)
    for site in ("attn_out", "mlp_out", "transcoder", "clt"):
        if site in low:
            return f"{site} of layer {layer[1] if layer else '?'}"
    if "embedding" in low:
        return "hook_embed"
    resid = "resid_post" in low or re.search(r"-res\b|-res[-/@:]", low) is not None
    if layer and resid:
        return f"blocks.{layer[1]}.hook_resid_post"
    return ""


def _saelens(folder: Path) -> SparseAutoencoder:
    cfg = _json(folder / "cfg.json")
    meta: dict = cfg["metadata"] if isinstance(cfg.get("metadata"), dict) else {}
    tensors = _tensors(folder / "sae_weights.safetensors")
    pick = {"file": "sae_weights.safetensors"}
    architecture = str(cfg.get("architecture") or "standard").lower().replace("_", "")
    fn = str(cfg.get("activation_fn_str") or cfg.get("activation_fn") or "relu").lower()
    kwargs = cfg.get("activation_fn_kwargs") or {}
    k = cfg.get("k") or (kwargs.get("k") if isinstance(kwargs, dict) else None)
    threshold = None
    if architecture in ("standard", "relu") and fn == "topk":
        architecture = "topk"
    if architecture == "standard":
        activation = "relu"
    elif architecture == "topk":
        activation = "topk"
        if not k:
            raise ModelLoadError("SAELens TopK SAE without k in cfg.json")
    elif architecture == "jumprelu":
        activation = "jumprelu"
        lower = {n.lower() for n in tensors}
        if "threshold" in lower:
            threshold = _pick(tensors, "threshold", **pick)
        else:
            threshold = torch.exp(_pick(tensors, "log_threshold", **pick))
    else:
        raise ModelLoadError(
            f"SAELens architecture {cfg.get('architecture')!r} is not read; isoscope reads "
            "standard (ReLU), topk and jumprelu SAEs"
        )
    normalise, scale = _normalisation(cfg, tensors)
    hook = str(cfg.get("hook_name") or meta.get("hook_name") or "")
    return SparseAutoencoder(
        w_enc=_pick(tensors, "W_enc", **pick),
        w_dec=_pick(tensors, "W_dec", **pick),
        b_enc=_pick(tensors, "b_enc", **pick),
        b_dec=_pick(tensors, "b_dec", **pick),
        threshold=threshold,
        k=int(k) if activation == "topk" and k is not None else None,
        activation=activation,
        format="saelens",
        subtract_b_dec=bool(cfg.get("apply_b_dec_to_input", True)),
        normalise=normalise,
        input_scale=scale,
        hook=hook,
        state=hook_state(hook),
        model_name=str(cfg.get("model_name") or meta.get("model_name") or ""),
    )


def _normalisation(cfg: dict, tensors: dict[str, torch.Tensor]) -> tuple[str, float]:
    """SAELens's ``normalize_activations`` as (:data:`NORMALISATIONS` entry, fixed factor)."""
    mode = str(cfg.get("normalize_activations") or "none").lower()
    if mode == "none":
        return "none", 1.0
    if mode in ("constant_norm_rescale", "layer_norm"):
        return mode, 1.0
    if mode == "expected_average_only_in":
        factor = cfg.get("norm_scaling_factor") or cfg.get("scaling_factor")
        if factor is None and "scaling_factor" in tensors:
            factor = float(tensors["scaling_factor"].reshape(-1)[0])
        if factor is None:
            raise ModelLoadError(
                "the SAE normalises its input by a dataset-wide factor (expected_average_only_in) "
                "that its cfg.json does not give (norm_scaling_factor): add it, or fold it into "
                "the weights"
            )
        return "scale", float(factor)
    raise ModelLoadError(
        f"the SAE's input normalisation {mode!r} is not read; isoscope reads none, "
        "expected_average_only_in (with norm_scaling_factor), constant_norm_rescale and layer_norm"
    )


def _sparsify(folder: Path, hint: str) -> SparseAutoencoder:
    cfg = _json(folder / "cfg.json")
    tensors = _tensors(folder / "sae.safetensors")
    pick = {"file": "sae.safetensors"}
    if not cfg.get("k"):
        raise ModelLoadError("sparsify SAE without k in cfg.json: only TopK SAEs are sparsify's")
    hook = str(cfg.get("hookpoint") or Path(hint.rstrip("/")).name)
    state = hook_state_or_none(hook)
    if state is None and re.search(r"mlp|attn|transcode", hook):
        hook_state(hook)  # a site other than the residual stream: refused in one line
    if state is None:  # a folder named otherwise (a local copy): the state must be given
        hook = ""
    w_dec = _pick(tensors, "W_dec", "decoder.weight", **pick)
    d_in = int(_pick(tensors, "b_dec", "decoder.bias", **pick).shape[0])
    if w_dec.shape[0] == d_in and w_dec.shape[1] != d_in:  # a (d, m) decoder: rows per feature
        w_dec = w_dec.T
    return SparseAutoencoder(
        w_enc=_pick(tensors, "encoder.weight", **pick).T.contiguous(),
        w_dec=w_dec.contiguous(),
        b_enc=_pick(tensors, "encoder.bias", **pick),
        b_dec=_pick(tensors, "b_dec", "decoder.bias", **pick),
        k=int(cfg["k"]),
        activation="topk",
        format="sparsify",
        subtract_b_dec=not cfg.get("transcode", False),
        hook=hook,
        state=state,
    )


def hook_state_or_none(hook: str) -> int | None:
    """:func:`hook_state`, or None for a hook it does not know (instead of refusing it)."""
    try:
        return hook_state(hook)
    except ModelLoadError:
        return None


def _check_shapes(sae: SparseAutoencoder) -> None:
    d, m = sae.w_enc.shape if sae.w_enc.ndim == 2 else (0, 0)
    expected = {
        "W_enc": ((d, m), tuple(sae.w_enc.shape)),
        "W_dec": ((m, d), tuple(sae.w_dec.shape)),
        "b_enc": ((m,), tuple(sae.b_enc.shape)),
        "b_dec": ((d,), tuple(sae.b_dec.shape)),
    }
    if sae.threshold is not None:
        expected["threshold"] = ((m,), tuple(sae.threshold.shape))
    for name, (want, got) in expected.items():
        if want != got or not d or not m:
            raise ModelLoadError(
                f"the SAE's {name} has shape {got}, expected {want} for an SAE of width {m} on "
                f"vectors of width {d}; the files are not a consistent SAE"
            )
    if sae.k is not None and not 1 <= sae.k <= m:
        raise ModelLoadError(f"the SAE's k = {sae.k} must be between 1 and its width {m}")
