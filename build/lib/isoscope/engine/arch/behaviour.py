"""What a text model does, measured on one probe, never assumed from its modules: whether it is
causal and whether padding moves its real tokens (:func:`behaviour`).

Forward passes of one random text of :data:`PROBE_TOKENS` tokens:

- as it is, twice: a model whose two passes differ is not deterministic (Reformer's random
  hashing draws new rotations every pass), so its states are not a function of the text;
- with its first token changed: a model where no later position moves mixes no tokens at all
  (MRA's attention without its CUDA kernel returns zeros), so it is no sequence model here;
- with its last token changed: a model is causal when no earlier position of any state moves
  (the definition; a causal text tower whose modules carry no ``is_causal`` flag, because the
  mask is passed per call, is read right);
- right-padded with :data:`PROBE_PADS` masked pad tokens: padding is harmless when no real
  position of any state moves beyond float noise. Token mixers that mix across the whole padded
  length whatever the mask says (Fourier mixing as in FNet, convolutions as in ConvBERT,
  Nyström or hashing approximations of attention) fail it; such a model runs unpadded
  (batches of texts of one length, :attr:`isoscope.engine.arch.layout.InputLayout.pad_with_mask`).

The same passes give each state's sequence axis (the axis whose size follows the text's length:
1 for (B, T, d) states, 2 for several residual streams (streams, B, T, d)); a state whose
sequence no axis follows (a pooled state that shortens the sequence differently) cannot be
compared position by position, and counts as moved by padding: unpadded runs are always right.

Cached per model (:data:`isoscope.engine.arch.memo.BEHAVIOUR`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from isoscope.engine.arch.lookup import base_of, module_of
from isoscope.engine.arch.memo import BEHAVIOUR
from isoscope.engine.arch.probe import forward_ids, probe_vocab, trace_ids

# real tokens of the probe text: not a power of two, so that a model that cuts the sequence into
# blocks (Reformer's hashed chunks, LED's windows) is probed across a block boundary
PROBE_TOKENS = 9
PROBE_PADS = 8  # pads added after them: a pooled state's length then differs too
# Largest movement of a real position (|difference| / |state| at that position) still counted
# as float noise: padded and unpadded passes run kernels of other shapes, whose sums round
# differently; half precision rounds far more coarsely than float32.
NOISE_FLOAT32 = 1e-4
NOISE_HALF = 3e-2


@dataclass(frozen=True)
class Behaviour:
    """What the probe measured. ``causal``: None when the probe could not tell (no state with a
    sequence axis, or the forward failed): the attention modules' flags decide then.
    ``pads_move_tokens``: padding moves a real token's state, or could not be shown not to;
    ``why`` says which state moved and by how much, or what stopped the probe.
    ``sequence_axes``: per state (``hidden_states``, then ``last_hidden_state``), its
    sequence axis, None where none follows the text length."""

    causal: bool | None
    pads_move_tokens: bool
    why: str = ""
    sequence_axes: tuple[int | None, ...] = ()
    deterministic: bool = True
    mixes_tokens: bool = True
    last_state: str = ""  # where last_hidden_state is not hidden_states[-1]: what is read instead
    num_states: int = 0  # hidden_states the forward returns (0: unknown)
    # states with fewer positions than the text has tokens, (index, positions): pooled states
    # (Funnel) or downsampled ones (CANINE's molecules)
    shortened: tuple[tuple[int, int], ...] = ()

    def refusal(self) -> str:
        """Why no analysis can read this model's states (empty when they can)."""
        if not self.deterministic:
            return (
                "its forward pass is not deterministic: the same text gives other hidden states "
                "on a second pass (random hashing or sampling at inference), so its states are "
                "not a function of the text"
            )
        if not self.mixes_tokens:
            return (
                "it mixes no tokens here: changing one token of a text moves no other position "
                "(its token mixer returned nothing; a kernel it needs may be missing on this "
                "device)"
            )
        return ""


def behaviour(model_or_loaded: Any, pad_id: int | None = None) -> Behaviour:
    """The :class:`Behaviour` of a text model, measured once per model (module doc). ``pad_id``:
    the token the pads hold (default: the loaded tokenizer's, else the config's, else 0)."""
    model = module_of(model_or_loaded)
    if pad_id is None:
        pad_id = getattr(getattr(model_or_loaded, "tokenizer", None), "pad_token_id", None)
    return BEHAVIOUR.get_or_compute(model_or_loaded, lambda: measure(model, pad_id))


def measure(model: torch.nn.Module, pad_id: int | None = None) -> Behaviour:
    """The three probe passes of the module doc on ``model``'s base model (uncached)."""
    base = base_of(model)
    n, k = PROBE_TOKENS, PROBE_PADS
    if pad_id is None:
        pad_id = getattr(model.config, "pad_token_id", None)
    pad_id = int(pad_id or 0)
    ids = trace_ids(model, n)
    other = ids.clone()
    vocab = probe_vocab(model)
    low = min(5, max(vocab - 2, 0))
    other[0, -1] = low + (int(ids[0, -1]) - low + 1) % max(vocab - low, 1)
    first = ids.clone()
    first[0, 0] = low + (int(ids[0, 0]) - low + 1) % max(vocab - low, 1)
    padded = torch.cat([ids, torch.full((1, k), pad_id, dtype=ids.dtype)], dim=1)
    mask = torch.cat([torch.ones_like(ids), torch.zeros((1, k), dtype=ids.dtype)], dim=1)
    failure = ""
    with torch.inference_mode():
        try:
            out = forward_ids(base, ids, output_hidden_states=True)
            plain, last = _states(out), _last_note(out)
            count = len(getattr(out, "hidden_states", None) or ())
            short = tuple(
                (i, int(a.shape[-2]))
                for i, a in enumerate(plain)
                if a.dim() >= 3 and a.shape[-2] < n
            )
            again = _states(forward_ids(base, ids, output_hidden_states=True))
            changed = _states(forward_ids(base, other, output_hidden_states=True))
            changed_first = _states(forward_ids(base, first, output_hidden_states=True))
        except Exception as exc:  # the model's own failure: every other forward shows it too
            return Behaviour(None, True, f"the probe's forward pass failed: {type(exc).__name__}")
        try:
            with_pads = _states(forward_ids(base, padded, mask, output_hidden_states=True))
        except Exception as exc:
            with_pads = None
            failure = f"a padded forward pass failed: {type(exc).__name__}"
    axes = tuple(
        _sequence_axis(a, None if with_pads is None else with_pads[i], n, n + k)
        for i, a in enumerate(plain)
    )
    deterministic = _same(plain, again)
    causal = _causal(plain, changed, axes, n)
    # no token mixing: neither changing the first token moves a later position nor changing the
    # last an earlier one
    mixes = causal is False or _moves_after_first(plain, changed_first, axes, n)
    if with_pads is None:
        return Behaviour(causal, True, failure, axes, deterministic, mixes, last, count, short)
    moved, why = _pads_move(plain, with_pads, axes, n)
    return Behaviour(causal, moved, why, axes, deterministic, mixes, last, count, short)


def _last_note(out: Any) -> str:
    """What the card says where ``last_hidden_state`` is not ``hidden_states[-1]``'s shape
    (Reformer's concatenates its two reversible streams, twice the width): the last state is
    then ``hidden_states[-1]``, like every other state."""
    hidden = getattr(out, "hidden_states", None) or ()
    last = getattr(out, "last_hidden_state", None)
    if not hidden or not isinstance(last, torch.Tensor) or last.shape == hidden[-1].shape:
        return ""
    return (
        f"the model's last_hidden_state {tuple(last.shape)[1:]} has another shape than its "
        f"hidden states {tuple(hidden[-1].shape)[1:]}: the last state read is hidden_states[-1]"
    )


def _noise(states: list[torch.Tensor]) -> float:
    return NOISE_FLOAT32 if states[0].dtype in (torch.float32, torch.float64) else NOISE_HALF


def _movement(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest |a - b| at one position over |a| there (positions along axis 0); 0 where a
    state is not finite (it says nothing then)."""
    a, b = a.float().reshape(a.shape[0], -1), b.float().reshape(b.shape[0], -1)
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        return 0.0
    if not a.numel():
        return 0.0
    return float(((a - b).norm(dim=1) / a.norm(dim=1).clamp_min(1e-12)).max())


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    """Two passes of one text give the same states, up to float noise."""
    return len(a) == len(b) and all(
        x.shape == y.shape
        and _movement(x.reshape(-1, x.shape[-1]), y.reshape(-1, y.shape[-1])) <= _noise(a)
        for x, y in zip(a, b, strict=True)
    )


def _moves_after_first(
    plain: list[torch.Tensor], changed: list[torch.Tensor], axes: tuple, n: int
) -> bool:
    """Whether changing the first token moves some later position of some state (True where no
    state has a sequence axis: nothing shows that it does not)."""
    pairs = [
        (a.movedim(ax, 0)[1:n], b.movedim(ax, 0)[1:n])
        for a, b, ax in zip(plain, changed, axes, strict=False)
        if ax is not None and a.shape == b.shape
    ]
    if not pairs:
        return True
    return any(_movement(a, b) > _noise(plain) for a, b in pairs)


def _states(out: Any) -> list[torch.Tensor]:
    """Every state of a forward pass: ``hidden_states``, then ``last_hidden_state``."""
    states = [h for h in (getattr(out, "hidden_states", None) or ()) if isinstance(h, torch.Tensor)]
    last = getattr(out, "last_hidden_state", None)
    if isinstance(last, torch.Tensor):
        states.append(last)
    return states


def _sequence_axis(a: torch.Tensor, padded: torch.Tensor | None, n: int, m: int) -> int | None:
    """The axis of ``a`` (a pass over n tokens) that grows with the text in ``padded`` (a pass
    over m tokens) while every other axis keeps its size: n and m positions, or at least that
    many for a model that pads the sequence itself to its block size (Reformer, LED: the first
    n are the text's); without a padded pass, the one axis of size n that is neither the first
    nor the last."""
    if padded is not None:
        if padded.dim() != a.dim():
            return None
        found = [
            ax
            for ax in range(a.dim())
            if n <= a.shape[ax] < padded.shape[ax]
            and padded.shape[ax] >= m
            and all(a.shape[o] == padded.shape[o] for o in range(a.dim()) if o != ax)
        ]
    else:
        found = [ax for ax in range(1, a.dim() - 1) if a.shape[ax] == n]
    return found[0] if len(found) == 1 else None


def _causal(
    plain: list[torch.Tensor], changed: list[torch.Tensor], axes: tuple, n: int
) -> bool | None:
    """Every earlier position of every state with a sequence axis unchanged (None: no such state)."""
    pairs = [
        (a.narrow(ax, 0, n - 1), b.narrow(ax, 0, n - 1))
        for a, b, ax in zip(plain, changed, axes, strict=False)
        if ax is not None and a.shape == b.shape
    ]
    if not pairs:
        return None
    return all(torch.allclose(a.float(), b.float(), rtol=1e-4, atol=1e-5) for a, b in pairs)


def _pads_move(
    plain: list[torch.Tensor], with_pads: list[torch.Tensor], axes: tuple, n: int
) -> tuple[bool, str]:
    """Whether a real position of some state moves when the pads are added, and which."""
    if len(plain) != len(with_pads):
        return True, f"{len(plain)} states unpadded, {len(with_pads)} padded"
    worst, where = 0.0, ""
    for i, (a, b, ax) in enumerate(zip(plain, with_pads, axes, strict=True)):
        if ax is None:
            return True, f"state {i} {tuple(a.shape)} has no axis that follows the text length"
        moved = _movement(a.movedim(ax, 0)[:n], b.movedim(ax, 0)[:n])
        if moved > worst:
            worst, where = moved, f"state {i} moves by {moved:.2g} of its norm"
    noise = _noise(plain)
    return worst > noise, where if worst > noise else ""
