"""Whether the weights of a loaded checkpoint are the checkpoint's: the card's ``weights`` line.

``from_pretrained`` builds the model from ``config.json`` and fills it with the checkpoint's
tensors by name; a tensor whose name the checkpoint does not have (or has with another shape)
keeps the random initialisation, and the load still succeeds. A checkpoint saved from a wrapper
(``module.`` from DistributedDataParallel, ``model.`` from a Lightning module, ``_orig_mod.`` from
``torch.compile``) or with renamed layers would then be analysed as random weights. So every
checkpoint load reads transformers' own loading report (missing, unexpected and mismatched keys,
error messages) and:

- a tensor the model expects but the checkpoint lacks is a problem only when what isoscope reads
  depends on it: the hidden states, and the logits of a masked-LM head. That is measured, not
  listed: one traced forward pass with only the missing tensors requiring gradients, and the
  gradient of the read outputs says which of them they depend on (:func:`weights_read`). A
  pooler the hidden states never pass through, or the decoder of an encoder-decoder whose
  encoder is analysed, may be missing; tied weights and buffers made at load (rotary caches,
  position ids) are not in the report at all, because transformers decides those from the
  model (its tied-weights map, its non-persistent buffers, ``_keys_to_ignore_on_load_missing``).
  Integer buffers (index tables, masks) are built from the config, never learned, so they are
  not counted either.
- when the missing tensors are under a wrapper prefix that every unexpected key of the
  checkpoint shares (:data:`WRAPPER_PREFIXES`, and chains of them), the prefix is stripped
  (``from_pretrained(key_mapping=...)``) and the load is checked again; the card says so.
- anything else refuses the load with one line naming how many tensors are missing and an
  example of each side (:class:`WeightsMismatchError`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from isoscope.engine.errors import ModelLoadError

# Prefixes a training wrapper puts before every key of the model it wraps: DistributedDataParallel
# and DataParallel (``module.``), a Lightning module's attribute (``model.``), torch.compile
# (``_orig_mod.``). Only whole chains of these, shared by every unexpected key, are stripped.
WRAPPER_PREFIXES = ("module.", "model.", "_orig_mod.")
EXAMPLES = 2  # names of each kind the refusal quotes


class WeightsMismatchError(ModelLoadError):
    """A checkpoint whose tensor names or shapes do not match the model its config builds."""


@dataclass(frozen=True)
class WeightsCheck:
    """What a checkpoint load measured: ``total`` tensors the model holds (its state dict),
    ``unread`` names the checkpoint lacks that nothing isoscope reads depends on (they keep their
    random initialisation), and ``stripped`` the wrapper prefix removed from the checkpoint's keys
    ("" when none)."""

    total: int
    unread: tuple[str, ...] = ()
    stripped: str = ""

    def label(self) -> str:
        """The card's ``weights`` line, e.g. ``trained (all 39 tensors from the checkpoint)``."""
        loaded = self.total - len(self.unread)
        if not self.unread:
            line = f"trained (all {self.total} tensors from the checkpoint"
        else:
            names = ", ".join(self.unread[:EXAMPLES]) + (
                ", ..." if len(self.unread) > EXAMPLES else ""
            )
            line = (
                f"trained ({loaded} of {self.total} tensors from the checkpoint; "
                f"{len(self.unread)} that no hidden state depends on are not in it and stay "
                f"random: {names}"
            )
        if self.stripped:
            line += f"; keys mapped: stripped prefix {self.stripped!r}"
        return line + ")"


def wrapper_prefix(unexpected: Iterable[str]) -> str:
    """The chain of :data:`WRAPPER_PREFIXES` that every name in ``unexpected`` starts with (the
    longest; "" when they share none)."""
    names = list(unexpected)
    if not names:
        return ""
    prefix = ""
    while True:
        longer = [
            prefix + w for w in WRAPPER_PREFIXES if all(n.startswith(prefix + w) for n in names)
        ]
        if not longer:
            return prefix
        prefix = longer[0]


def key_mapping(prefix: str) -> dict[str, str]:
    """``from_pretrained``'s ``key_mapping`` that strips ``prefix`` from the checkpoint's keys."""
    return {"^" + re.escape(prefix): ""}


def report_of(info: Any) -> dict[str, Any]:
    """transformers' loading report as a dict of sets/lists (``output_loading_info=True``)."""
    info = info.to_dict() if hasattr(info, "to_dict") else dict(info or {})
    return {
        "missing_keys": set(info.get("missing_keys") or ()),
        "unexpected_keys": set(info.get("unexpected_keys") or ()),
        "mismatched_keys": [tuple(m) for m in info.get("mismatched_keys") or ()],
        "error_msgs": [str(e) for e in info.get("error_msgs") or ()],
    }


def not_loaded(report: Mapping[str, Any]) -> set[str]:
    """Names the model holds that did not get the checkpoint's values: missing or of another shape."""
    return set(report["missing_keys"]) | {m[0] for m in report["mismatched_keys"]}


def _tensor(model: torch.nn.Module, name: str) -> torch.Tensor | None:
    for get in (model.get_parameter, model.get_buffer):
        try:
            return get(name)
        except (AttributeError, TypeError):
            continue
    return None


def weights_read(
    full: torch.nn.Module, analysed: torch.nn.Module, names: Iterable[str], logits: bool
) -> set[str]:
    """The names (tensors of ``full``, the model ``from_pretrained`` built) that the hidden states
    of ``analysed`` (``full`` or its encoder), and its ``logits`` when asked, depend on.

    Measured by one traced forward pass (:func:`isoscope.engine.arch.probe.trace_forward`) in
    which only these tensors require gradients. A tensor of ``full`` that ``analysed`` does not
    hold (the decoder of an encoder-decoder) is not read; an integer buffer (an index table or
    mask built from the config) neither. A name that cannot be resolved, or a forward pass that
    fails, counts every floating tensor as read: the check never passes what it could not see."""
    from isoscope.engine.arch.probe import trace_forward

    names = sorted(set(names))
    held = {id(t) for t in analysed.parameters()} | {id(t) for t in analysed.buffers()}
    leaves: dict[str, torch.Tensor] = {}
    read: set[str] = set()
    for name in names:
        tensor = _tensor(full, name)
        if tensor is None:
            read.add(name)
        elif id(tensor) in held and tensor.is_floating_point():
            leaves[name] = tensor
    if not leaves:
        return read
    flags = {p: p.requires_grad for p in analysed.parameters()}
    distinct = list({id(t): t for t in leaves.values()}.values())
    try:
        for param in flags:
            param.requires_grad_(False)
        for tensor in distinct:
            tensor.requires_grad_(True)
        with torch.inference_mode(False), torch.enable_grad():
            out = trace_forward(analysed, output_hidden_states=True)
            outputs = list(getattr(out, "hidden_states", None) or ())
            last = getattr(out, "last_hidden_state", None)
            outputs += [last] if last is not None else []
            if logits and getattr(out, "logits", None) is not None:
                outputs.append(out.logits)
            outputs = [o for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]
            if not outputs:
                return read
            total = sum(o.float().sum() for o in outputs)
            grads = torch.autograd.grad(total, distinct, allow_unused=True)
    except Exception:
        return read | set(leaves)
    finally:
        for tensor in distinct:
            if not isinstance(tensor, torch.nn.Parameter):
                tensor.requires_grad_(False)
        for param, flag in flags.items():
            param.requires_grad_(flag)
    used = {id(t) for t, g in zip(distinct, grads, strict=True) if g is not None}
    return read | {name for name, tensor in leaves.items() if id(tensor) in used}


def refusal(
    source: str,
    model: torch.nn.Module,
    report: Mapping[str, Any],
    read: set[str],
    stripped: str = "",
) -> WeightsMismatchError:
    """The one-line refusal for a load whose read tensors did not all come from the checkpoint."""
    total = len(model.state_dict())
    kind = type(model).__name__
    mismatched = [m for m in report["mismatched_keys"] if m[0] in read]
    missing = sorted(read - {m[0] for m in mismatched})
    parts = []
    if missing:
        parts.append(
            f"{len(missing)} of {total} weights {kind} expects are not in the checkpoint "
            f"(e.g. {', '.join(missing[:EXAMPLES])})"
        )
    if mismatched:
        name, there, here = sorted(mismatched)[0]
        parts.append(
            f"{len(mismatched)} have another shape there (e.g. {name}: "
            f"{'x'.join(map(str, there))} in the checkpoint, {'x'.join(map(str, here))} in the "
            "model config.json builds)"
        )
    unexpected = sorted(report["unexpected_keys"])
    has = (
        f"; the checkpoint has names isoscope does not map (e.g. {', '.join(unexpected[:EXAMPLES])})"
        if unexpected
        else ""
    )
    mapped = f" after stripping the prefix {stripped!r}" if stripped else ""
    return WeightsMismatchError(
        f"{source!r}: {'; '.join(parts)}{mapped}, so the analysis would read random weights{has}. "
        f"Rename the checkpoint's keys to those of its config.json architecture (a wrapper prefix "
        f"{', '.join(WRAPPER_PREFIXES)} is stripped on its own), or pass the checkpoint that "
        "matches the config"
    )
