"""The card's one forward pass over the corpus: every probe of a :class:`~.chain.Plan` measured by
hooks (attached through :func:`isoscope.engine.arch.hooks.forward_hooks`), and h_s . u on every
state, for the real (non-padding) tokens, in (text, position) order within each batch."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np
import torch

from isoscope.analysis.dimension.chain import Plan, norm_scale
from isoscope.engine.arch.hooks import forward_hooks
from isoscope.engine.arch.norms import first_tensor
from isoscope.engine.budget.batching import plan_batches
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import UnsupportedModelError
from isoscope.engine.extraction import TokenizedCorpus, pad_batch, pad_token_id, residual_states

SAMPLE_TOKENS = 2000  # full vectors of the chosen state kept for the geometry shares


@dataclass(frozen=True)
class PassResult:
    """``measured``: probe name -> (N,) float64; ``values``: (S, N) h_s . u; ``text`` / ``position``
    / ``token``: (N,) int64; ``sample``: (m, d) float64 vectors of the chosen state (a seeded
    subset); ``state_sum`` / ``state_sumsq``: (d,) over every token of the chosen state;
    ``lens_scale``: (N,) the final norm's scale of the chosen state (None without one)."""

    measured: dict[str, np.ndarray]
    values: np.ndarray
    text: np.ndarray
    position: np.ndarray
    token: np.ndarray
    sample: np.ndarray
    state_sum: np.ndarray
    state_sumsq: np.ndarray
    lens_scale: np.ndarray | None


class _Recorder:
    """Hook functions writing into ``batch`` (name -> list of (N, ...) tensors) for the current
    ``mask``."""

    def __init__(self, plan: Plan, device: torch.device) -> None:
        self.plan = plan
        self.mask: torch.Tensor | None = None
        self.batch: dict[str, list[torch.Tensor]] = {}
        self.device = device
        self.matrices = {
            key: (
                [n for n, _ in entries],
                torch.tensor(np.stack([v for _, v in entries], axis=1), dtype=torch.float32),
            )
            for key, entries in plan.probes.items()
        }

    def _put(self, name: str, value: torch.Tensor) -> None:
        self.batch.setdefault(name, []).append(value.detach().float())

    def _gather(self, x: torch.Tensor) -> torch.Tensor:
        """The real tokens' rows of ``x``, (N, ...). A module may see the batch as (B, T, ...) or
        flattened to (B * T, ...) (OPT's MLP); anything else is not one row per token."""
        mask = self.mask
        assert mask is not None, "a batch's mask is set before its forward pass"
        if tuple(x.shape[: mask.ndim]) != tuple(mask.shape) and x.shape[0] == mask.numel():
            x = x.reshape(*mask.shape, *x.shape[1:])
        if tuple(x.shape[: mask.ndim]) != tuple(mask.shape):
            raise UnsupportedModelError(
                f"a module of this model sees the batch as {tuple(x.shape)}, not one row per "
                f"token of the {tuple(mask.shape)} batch, so its contribution cannot be read"
            )
        return x[mask]

    def _project(self, key, x: torch.Tensor) -> None:
        names, matrix = self.matrices[key]
        matrix = matrix.to(x.device)
        picked = self._gather(x.float() @ matrix)  # (N, k): project first, then gather
        for j, name in enumerate(names):
            self._put(name, picked[:, j])

    def hooks(self) -> tuple[dict, dict]:
        """(forward hooks with kwargs, forward pre-hooks with kwargs)."""
        post: dict = {}
        pre: dict = {}
        for module, where in self.plan.probes:
            if where == "in":
                pre.setdefault(module, []).append(self._in(module))
            else:
                post.setdefault(module, []).append(self._out(module))
        for module, (name, kind, eps) in self.plan.scales.items():
            pre.setdefault(module, []).append(self._scale(name, kind, eps))
        for module, entries in self.plan.heads.items():
            pre.setdefault(module, []).append(self._heads(entries))
        for module, entries in self.plan.experts.items():
            post.setdefault(module, []).append(self._experts(module, entries))
        return post, pre

    def _in(self, module):
        def hook(mod, args, kwargs):
            x = first_tensor(args, kwargs)
            if x is not None:
                self._project((module, "in"), x)

        return hook

    def _out(self, module):
        def hook(mod, args, kwargs, output):
            x = output[0] if isinstance(output, tuple | list) else output
            if isinstance(x, torch.Tensor):
                self._project((module, "out"), x)

        return hook

    def _scale(self, name, kind, eps):
        def hook(mod, args, kwargs):
            x = first_tensor(args, kwargs)
            if x is not None:
                self._put(name, norm_scale(self._gather(x), kind, eps))

        return hook

    def _heads(self, entries):
        def hook(mod, args, kwargs):
            z = first_tensor(args, kwargs)
            if z is None:
                return
            z = self._gather(z).float()  # (N, H * dh)
            for name, reading in entries:
                r = torch.as_tensor(reading, dtype=torch.float32, device=z.device)  # (H, dh)
                per_head = torch.einsum("nhd,hd->nh", z.reshape(len(z), *r.shape), r)  # (N, H)
                for h in range(r.shape[0]):
                    self._put(f"{name}:{h}", per_head[:, h])

        return hook

    def _experts(self, module, entries):
        names = list(inspect.signature(module.forward).parameters)

        def hook(mod, args, kwargs, output):
            bound = dict(zip(names, args, strict=False)) | dict(kwargs)
            x, index, weights = (bound.get(k) for k in (names[0], "top_k_index", "top_k_weights"))
            if not all(isinstance(t, torch.Tensor) for t in (x, index, weights)):
                return
            flat = self.mask.reshape(-1)
            if x.shape[0] != flat.shape[0] or output.shape[0] != flat.shape[0]:
                return  # not one row per token of the batch: no split
            for name, v, count in entries:
                vt = torch.as_tensor(v, dtype=torch.float32, device=x.device)
                total = output[flat].float() @ vt
                parts = _expert_parts(module, x, index, weights, count, flat, vt)
                for e, part in enumerate(parts):
                    self._put(f"{name}:{e}", part)
                self._put(f"{name}:total", total)

        return hook

    def take(self) -> dict[str, torch.Tensor]:
        """This batch's measurements (one call per module and batch), then a fresh batch."""
        taken = {}
        for name, parts in self.batch.items():
            if len(parts) != 1:
                raise UnsupportedModelError(
                    "a module of this model runs more than once per forward pass (a shared "
                    "block), so its contribution cannot be told apart per layer"
                )
            taken[name] = parts[0]
        self.batch = {}
        return taken


def _expert_parts(module, x, index, weights, count, flat, vt) -> list[torch.Tensor]:
    """Each expert's output along ``vt`` for the batch's real tokens. First each expert alone, the
    other routes sent to the skip slot ``count`` (one more run of the experts in all); where the
    implementation does not skip that slot (the parts do not sum to the whole), every route but
    the expert's own gets weight 0 instead (a run of all routed experts per expert)."""
    whole = module.forward(x, index, weights)[flat].float() @ vt
    parts = []
    for e in range(count):
        routed = torch.where(index == e, index, torch.full_like(index, count))
        parts.append(module.forward(x, routed, weights)[flat].float() @ vt)
    scale = float(whole.abs().max()) + 1e-6
    if float((sum(parts) - whole).abs().max()) <= 1e-4 * scale:
        return parts
    return [
        module.forward(x, index, weights * (index == e).to(weights.dtype))[flat].float() @ vt
        for e in range(count)
    ]


def run_pass(
    loaded,
    tokenized: TokenizedCorpus,
    plan: Plan,
    u: np.ndarray,
    state: int,
    batch_size: int,
    *,
    lens=None,
    seed: int = 0,
    progress=None,
    qk=None,
) -> PassResult:
    """One forward pass over ``tokenized`` with the plan's hooks (module doc). ``lens``:
    (kind, eps) of the final norm, whose per-token scale of the chosen state the logit lens
    divides by. ``qk``: a :class:`~isoscope.analysis.dimension.qk.QKShare` whose hooks ride
    along."""
    encoder = loaded.encoder
    device = loaded.device
    recorder = _Recorder(plan, device)
    post, pre = recorder.hooks()
    for module, fn in (qk.hooks() if qk is not None else {}).items():
        pre.setdefault(module, []).append(fn)
    ut = torch.as_tensor(u, dtype=torch.float32, device=device)
    extra = {"use_cache": False} if getattr(encoder.config, "use_cache", None) is not None else {}
    pad_id = pad_token_id(loaded)
    measured: dict[str, list[np.ndarray]] = {}
    values, meta, lens_scales = [], [], []
    rng = np.random.default_rng(seed)
    total_tokens = int(tokenized.lengths.sum())
    keep_share = min(1.0, SAMPLE_TOKENS / max(total_tokens, 1))
    sample: list[np.ndarray] = []
    width = len(u)
    state_sum = np.zeros(width)
    state_sumsq = np.zeros(width)
    batches = plan_batches(tokenized.lengths, batch_size)
    with (
        forward_hooks(post, with_kwargs=True),
        forward_hooks(pre, pre=True, with_kwargs=True),
        torch.inference_mode(),
    ):
        for done, rows in enumerate(batches):
            ids, mask = pad_batch(tokenized, rows, pad_id)
            mask_t = torch.from_numpy(mask.astype(bool)).to(device)
            recorder.mask = mask_t
            if qk is not None:
                qk.mask = mask_t
            out = encoder(
                input_ids=torch.from_numpy(ids).to(device),
                attention_mask=torch.from_numpy(mask).to(device),
                output_hidden_states=True,
                **extra,
            )
            states = residual_states(out, encoder)
            taken = recorder.take()
            if taken:  # one transfer per batch: every probe's (N,) values stacked
                stacked = to_numpy(torch.stack(list(taken.values())))
                for name, row in zip(taken, stacked, strict=True):
                    measured.setdefault(name, []).append(row)
            chosen = states[state][mask_t].float()  # (N, d)
            values.append(to_numpy(torch.stack([(s.float() @ ut)[mask_t] for s in states])))
            if lens is not None:
                lens_scales.append(to_numpy(norm_scale(chosen, *lens)))
            chosen64 = chosen.double()
            state_sum += to_numpy(chosen64.sum(0))
            state_sumsq += to_numpy(chosen64.pow(2).sum(0))
            picked = rng.random(len(chosen)) < keep_share
            if picked.any():
                sample.append(to_numpy(chosen64[torch.from_numpy(picked).to(device)]))
            lengths = tokenized.lengths[rows]
            meta.append(
                np.column_stack(
                    [
                        np.repeat(rows, lengths),
                        np.concatenate([np.arange(n) for n in lengths]),
                        ids[mask.astype(bool)],
                    ]
                )
            )
            if progress is not None:
                progress(done + 1, len(batches))
    meta_all = np.concatenate(meta).astype(np.int64)
    return PassResult(
        measured={k: np.concatenate(v) for k, v in measured.items()},
        values=np.concatenate(values, axis=1),
        text=meta_all[:, 0],
        position=meta_all[:, 1],
        token=meta_all[:, 2],
        sample=np.concatenate(sample) if sample else np.zeros((0, width)),
        state_sum=state_sum,
        state_sumsq=state_sumsq,
        lens_scale=np.concatenate(lens_scales) if lens_scales else None,
    )
