"""Assemble a :class:`DimensionCard` from the card's forward pass (:mod:`.forward`), the model's
parameters (readers, the logit lens) and the ablation passes (:mod:`.ablation`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import torch

from isoscope.analysis.anisotropy import pair_terms, unit_rows
from isoscope.analysis.dimension.ablation import ablation_effects
from isoscope.analysis.dimension.chain import (
    SPLIT_TOLERANCE,
    Plan,
    Row,
    build_plan,
    norm_parameters,
)
from isoscope.analysis.dimension.forward import PassResult, run_pass
from isoscope.analysis.dimension.logits import logit_effect
from isoscope.analysis.dimension.params import HISTOGRAM_BINS, POSITION_BINS
from isoscope.analysis.dimension.qk import QKShare, qk_readers
from isoscope.analysis.dimension.settings import DimensionSettings
from isoscope.analysis.quant.sites import weight_matrix
from isoscope.engine.arch import is_causal, wiring
from isoscope.engine.arch.memo import ModelFacts
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError, UnsupportedModelError
from isoscope.engine.extraction import tokenize
from isoscope.engine.extraction.tokenization import is_punct
from isoscope.engine.naming import hidden_state_names
from isoscope.engine.params import LLM_INT8_THRESHOLD, MASSIVE_ABS_THRESHOLD, MASSIVE_MEDIAN_RATIO

DELIMITERS = frozenset(".,;:!?") | frozenset({"\n", "Ċ", "ĊĊ", "<0x0A>", "\\n"})
TOKEN_KINDS = ("first position", "special", "delimiter", "punctuation", "frequent", "rare")


@dataclass(frozen=True)
class DimensionCard:
    """Everything the card shows (see :func:`isoscope.analysis.dimension.dimension_card`).

    ``contributions``: one dict per component (``layer`` 0 = embeddings .. L, ``component``,
    ``head`` / ``expert`` when split, ``norm`` for a norm's bias term, ``mean``,
    ``first_position``, ``other_positions``, ``at_top``), summing to the value on every token;
    ``sum_check`` is the largest difference over the tokens. ``values`` (N,) is the value per
    token at the chosen state with ``text`` / ``position`` / ``token`` ids beside it."""

    title: str
    model: str
    state: int
    state_names: tuple[str, ...]
    width: int
    dim: int | None
    offset: float
    is_decoder: bool
    n_texts: int
    n_tokens: int
    top_tokens: list[dict]
    histogram: dict
    by_kind: list[dict]
    by_position: list[dict]
    by_state: list[dict]
    contributions: list[dict]
    sum_check: float
    value_scale: float
    readers: list[dict]
    qk_share: list[dict]
    logit_effect: dict | None
    ablation: dict | None
    geometry: dict
    seconds: float
    notes: tuple[str, ...] = ()
    values: np.ndarray | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``isoscope dimension`` (docs/cli.md)."""
        return {
            "title": self.title,
            "state": self.state_names[self.state],
            "dim": self.dim,
            "offset": self.offset,
            "width": self.width,
            "is_decoder": self.is_decoder,
            "corpus": {"texts": self.n_texts, "tokens": self.n_tokens},
            "top_tokens": self.top_tokens,
            "histogram": self.histogram,
            "by_kind": self.by_kind,
            "by_position": self.by_position,
            "by_state": self.by_state,
            "contributions": self.contributions,
            "sum_check": self.sum_check,
            "value_scale": self.value_scale,
            "readers": self.readers,
            "qk_share": self.qk_share,
            "logit_effect": self.logit_effect,
            "ablation": self.ablation,
            "geometry": self.geometry,
            "notes": list(self.notes),
            "seconds": self.seconds,
        }


def build_card(loaded, texts, settings: DimensionSettings, progress=None) -> DimensionCard:
    """The card of ``settings`` on ``texts`` (the package docstring)."""
    started = time.perf_counter()
    width = int(loaded.info.hidden_size)
    num_layers = int(loaded.info.num_layers)
    names = tuple(hidden_state_names(num_layers))
    if settings.state > num_layers:
        raise InputError(
            f"state {settings.state} does not exist: the model has states 0 (emb) to {num_layers}"
        )
    u = settings.vector(width)
    tokenized = tokenize(loaded, tuple(texts), settings.max_length)
    wired = wiring(loaded)
    final = next((n for n in wired.norms if n.role == "final"), None)
    named = dict(loaded.model.named_modules())
    final_params = norm_parameters(named[final.path], final, final.width) if final else None
    blocks_in, final_applied = state_source(loaded, tokenized, settings.state)
    plan = build_plan(loaded, u, blocks_in, final_applied)
    lens = (final.kind, final_params[2]) if final is not None and final_params is not None else None
    decoder = bool(is_causal(loaded))
    qk_readers_found = qk_readers(loaded, width)
    qk = QKShare(qk_readers_found, u, decoder, settings.seed) if qk_readers_found else None
    result = run_pass(
        loaded,
        tokenized,
        plan,
        u,
        settings.state,
        settings.batch_size,
        lens=lens,
        seed=settings.seed,
        progress=progress,
        qk=qk,
    )
    notes = list(plan.notes)
    value = result.values[settings.state] + settings.offset
    rows, parts = resolve_rows(plan, result, notes)
    if settings.offset:
        rows.append(Row(0, "offset", const=settings.offset))
        parts.append(np.full(len(value), settings.offset))
    parts_arr = np.stack(parts) if parts else np.zeros((0, len(value)))
    sum_check = float(np.abs(parts_arr.sum(0) - value).max()) if len(value) else 0.0
    top = _top_indices(value, settings.top_k)
    contributions = _contribution_table(rows, parts_arr, result.position, top)
    tok = loaded.tokenizer
    card = DimensionCard(
        title=settings.title,
        model=loaded.info.display_name,
        state=settings.state,
        state_names=names,
        width=width,
        dim=settings.dim,
        offset=float(settings.offset),
        is_decoder=decoder,
        n_texts=len(tokenized.input_ids),
        n_tokens=len(value),
        top_tokens=_top_tokens(value, result, tokenized, tok, settings),
        histogram=_histogram(value),
        by_kind=_by_kind(value, result, tokenized, tok),
        by_position=_by_position(value, result.position),
        by_state=_by_state(result.values + settings.offset, result.position, names),
        contributions=contributions,
        sum_check=sum_check,
        value_scale=float(np.abs(value).max(initial=0.0)),
        readers=readers(loaded, u, settings.dim),
        qk_share=qk.rows() if qk is not None else [],
        logit_effect=(
            logit_effect(
                loaded,
                u,
                value - settings.offset,
                result,
                top,
                final_params,
                final_applied and settings.state == num_layers,
                settings.top_k,
                final,
            )
            if decoder
            else None
        ),
        ablation=None,
        geometry=_geometry(u, settings.dim, result, value - settings.offset),
        seconds=0.0,
        notes=tuple(notes),
        values=value,
    )
    if settings.ablation_texts:
        source = (blocks_in, final_applied)
        ablation = ablation_effects(
            loaded, tokenized, u, settings, value - settings.offset, result, source
        )
        card = _replace(card, ablation=ablation)
    return _replace(card, seconds=time.perf_counter() - started)


def _replace(card: DimensionCard, **changes) -> DimensionCard:
    from dataclasses import replace

    return replace(card, **changes)


_SOURCES = ModelFacts(per_module=False)  # per model: {state: (blocks, final)}


def state_source(loaded, tokenized, state: int) -> tuple[int, bool]:
    """:func:`read_state_source`, remembered per model and state (a fact of the model)."""
    known = _SOURCES.get_or_compute(loaded, dict)
    if state not in known:
        known[state] = read_state_source(loaded, tokenized, state)
    return known[state]


def read_state_source(loaded, tokenized, state: int) -> tuple[int, bool]:
    """What hidden state ``state`` is, read from one short forward pass of the first text with
    hooks: ``(blocks, final)``, the output of the first ``blocks`` blocks (0: the first block's
    input, the embeddings), passed through the final norm when ``final``. Most models number
    their states so that state s is block s's output; some return the blocks' outputs from the
    first block on (Mamba), and state L is often the final norm's output."""
    from isoscope.engine.arch import blocks_of
    from isoscope.engine.arch.hooks import forward_hooks
    from isoscope.engine.extraction import residual_states

    found = blocks_of(loaded.model)
    if found is None:
        raise UnsupportedModelError("the model has no list of per-layer blocks to decompose")
    blocks = found[1]
    final = next((n for n in wiring(loaded).norms if n.role == "final"), None)
    seen: dict[tuple[int, bool], torch.Tensor] = {}

    def keep(key):
        def hook(module, args, output):
            x = output[0] if isinstance(output, tuple | list) else output
            seen.setdefault(key, x)

        return hook

    def keep_input(module, args):
        if args and isinstance(args[0], torch.Tensor):
            seen.setdefault((0, False), args[0])

    hooks = {b: keep((i + 1, False)) for i, b in enumerate(blocks)}
    if final is not None:
        hooks[dict(loaded.model.named_modules())[final.path]] = keep((len(blocks), True))
    ids = torch.as_tensor(tokenized.input_ids[0][:16], device=loaded.device)[None]
    with (
        forward_hooks(hooks),
        forward_hooks({blocks[0]: keep_input}, pre=True),
        torch.inference_mode(),
    ):
        out = loaded.encoder(input_ids=ids, output_hidden_states=True)
        target = residual_states(out, loaded.encoder)[state]
    streams = [
        x
        for (blocks_done, final_norm), x in seen.items()
        if blocks_done >= 1 and not final_norm and isinstance(x, torch.Tensor)
        if x.shape != target.shape
    ]
    if streams:
        raise UnsupportedModelError(
            f"this model's blocks pass tensors of shape {tuple(streams[0].shape)} between them, "
            f"not one residual stream of shape {tuple(target.shape)} (parallel streams, as in "
            "AltUp), so its hidden states cannot be decomposed into the blocks' contributions"
        )
    for key in sorted(seen, key=lambda k: (abs(k[0] - state), k[1])):
        x = seen[key]
        if isinstance(x, torch.Tensor) and x.shape == target.shape and torch.equal(x, target):
            return key
    raise UnsupportedModelError(
        f"hidden state {state} of this model is neither a block's output nor its final norm's, "
        "so it cannot be decomposed into the blocks' contributions"
    )


def resolve_rows(plan: Plan, result: PassResult, notes: list[str]) -> tuple[list[Row], list]:
    """Each row's per-token values; a head or expert split replaces its row when it sums to it
    (within :data:`SPLIT_TOLERANCE`), else it is dropped with a note."""
    measured = result.measured

    def raw(row: Row) -> np.ndarray | None:
        n = result.values.shape[1]
        total = np.full(n, row.const, dtype=np.float64)
        for sign, name in row.probes:
            if name not in measured:
                return None
            total = total + sign * measured[name]
        return total

    def scale(row: Row) -> np.ndarray:
        factor = np.ones(result.values.shape[1])
        for name in row.scales:
            factor = factor / measured[name]
        return factor

    plain = [r for r in plan.rows if r.group is None]
    groups: dict[str, list[Row]] = {}
    for r in plan.rows:
        if r.group is not None:
            groups.setdefault(r.group, []).append(r)
    values: dict[int, np.ndarray] = {}
    for r in plain:
        v = raw(r)
        if v is None:
            raise UnsupportedModelError(
                f"layer {r.layer}'s {r.component} was not seen in the forward pass; this model's "
                "blocks do not run as their modules say"
            )
        values[id(r)] = v
    replaced: dict[int, list[tuple[Row, np.ndarray]]] = {}
    for key, members in groups.items():
        kind, layer = key.split(":")
        parent = next((r for r in plain if r.component == kind and r.layer == int(layer)), None)
        if parent is None:
            continue
        parent_v = values[id(parent)]
        pairs = [(m, raw(m)) for m in members if m.component != "mlp rest"]
        if any(v is None for _, v in pairs):
            continue
        split = cast(list[tuple[Row, np.ndarray]], pairs)  # every value is there (checked above)
        total = sum(v for _, v in split)
        tolerance = SPLIT_TOLERANCE * (np.abs(parent_v).max(initial=0) + 1e-6)
        if kind == "mixer":
            if np.abs(total - parent_v).max(initial=0) > tolerance:
                notes.append(
                    f"layer {layer}: the attention's output projection is not what the layer "
                    "adds (a norm or gate after it), so the token mixer is one row, not per head"
                )
                continue
            replaced[id(parent)] = split
        else:
            expert_name = split[0][0].probes[0][1].rsplit(":", 1)[0] if split else ""
            whole = measured.get(f"{expert_name}:total")
            if whole is None or np.abs(total - whole).max(initial=0) > SPLIT_TOLERANCE * (
                np.abs(whole).max(initial=0) + 1e-6
            ):
                notes.append(f"layer {layer}: the routed experts could not be run one by one")
                continue
            rest = next(m for m in members if m.component == "mlp rest")
            replaced[id(parent)] = [*split, (rest, parent_v - total)]
    rows: list[Row] = []
    parts: list[np.ndarray] = []
    for r in plain:
        for member, v in replaced.get(id(r), [(r, values[id(r)])]):
            rows.append(member)
            parts.append(v * scale(member))
    order = sorted(range(len(rows)), key=lambda k: rows[k].layer)
    return [rows[k] for k in order], [parts[k] for k in order]


def _top_indices(value: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-np.abs(value), kind="stable")[:k]


def _mean(x: np.ndarray) -> float | None:
    return float(x.mean()) if len(x) else None


def _contribution_table(rows, parts: np.ndarray, position: np.ndarray, top) -> list[dict]:
    first = position == 0
    table = []
    for row, v in zip(rows, parts, strict=True):
        entry = {"layer": row.layer, "component": row.component}
        if row.component == "attention head":
            entry["head"] = row.index
        if row.component == "expert":
            entry["expert"] = row.index
        if row.norm:
            entry["norm"] = row.norm
        entry |= {
            "mean": float(v.mean()),
            "first_position": _mean(v[first]),
            "other_positions": _mean(v[~first]),
            "at_top": _mean(v[top]),
        }
        table.append(entry)
    return table


def _token_text(tok, ids) -> list[str]:
    return [str(t) for t in tok.convert_ids_to_tokens([int(i) for i in ids])]


def _top_tokens(value, result: PassResult, tokenized, tok, settings) -> list[dict]:
    order = np.argsort(value, kind="stable")
    picks = [("high", i) for i in order[::-1][: settings.top_k]]
    picks += [("low", i) for i in order[: settings.top_k]]
    out = []
    for end, i in picks:
        text, pos = int(result.text[i]), int(result.position[i])
        ids = tokenized.input_ids[text]
        lo, hi = max(0, pos - settings.context), min(len(ids), pos + settings.context + 1)
        words = _token_text(tok, ids[lo:hi])
        words[pos - lo] = f"[[{words[pos - lo]}]]"
        out.append(
            {
                "end": end,
                "text": text,
                "position": pos,
                "token": _token_text(tok, [result.token[i]])[0],
                "value": float(value[i]),
                "context": " ".join(words),
            }
        )
    return out


def _histogram(value: np.ndarray) -> dict:
    counts, edges = np.histogram(value, bins=HISTOGRAM_BINS)
    return {"edges": edges.tolist(), "counts": counts.astype(int).tolist()}


def token_kinds(result: PassResult, tokenized, tok) -> dict[str, np.ndarray]:
    """Boolean (N,) masks of :data:`TOKEN_KINDS`. Delimiters are sentence and clause marks and
    newlines; frequent tokens are the most common ids that together make half of the corpus."""
    special = np.concatenate(tokenized.special)[_order(result, tokenized)]
    ids, inverse, counts = np.unique(result.token, return_inverse=True, return_counts=True)
    strings = _token_text(tok, ids)
    core = np.array([s.removeprefix("##").lstrip("Ġ▁") or s for s in strings], dtype=object)
    is_delim = np.array(
        [c in DELIMITERS or s in DELIMITERS for c, s in zip(core, strings, strict=True)]
    )
    is_p = np.array([is_punct(s) for s in strings]) & ~is_delim
    by_count = np.argsort(-counts, kind="stable")
    covered = np.cumsum(counts[by_count]) <= counts.sum() / 2
    covered[0] = True
    frequent_ids = np.zeros(len(ids), dtype=bool)
    frequent_ids[by_count[covered]] = True
    return {
        "first position": result.position == 0,
        "special": special,
        "delimiter": is_delim[inverse] & ~special,
        "punctuation": is_p[inverse] & ~special,
        "frequent": frequent_ids[inverse] & ~special,
        "rare": ~frequent_ids[inverse] & ~special,
    }


def _order(result: PassResult, tokenized) -> np.ndarray:
    """Indices into the concatenated (text, position) order of the pass's tokens."""
    starts = np.concatenate([[0], np.cumsum(tokenized.lengths)[:-1]])
    return starts[result.text] + result.position


def _by_kind(value, result, tokenized, tok) -> list[dict]:
    kinds = token_kinds(result, tokenized, tok)
    return [
        {
            "kind": kind,
            "count": int(mask.sum()),
            "mean": _mean(value[mask]),
            "mean_abs": _mean(np.abs(value[mask])),
        }
        for kind, mask in kinds.items()
    ]


def _by_position(value, position) -> list[dict]:
    out = []
    edges = [*POSITION_BINS, np.inf]
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        mask = (position >= lo) & (position < hi)
        if mask.any():
            label = (
                str(lo) if hi == lo + 1 else f"{lo}-{int(hi) - 1}" if np.isfinite(hi) else f"{lo}+"
            )
            out.append(
                {
                    "positions": label,
                    "count": int(mask.sum()),
                    "mean": _mean(value[mask]),
                    "mean_abs": _mean(np.abs(value[mask])),
                }
            )
    return out


def _by_state(values: np.ndarray, position: np.ndarray, names) -> list[dict]:
    first = position == 0
    return [
        {
            "state": names[s],
            "mean": float(v.mean()),
            "mean_abs": float(np.abs(v).mean()),
            "max_abs": float(np.abs(v).max()),
            "first_position": _mean(v[first]),
            "other_positions": _mean(v[~first]),
        }
        for s, v in enumerate(values)
    ]


def readers(loaded, u: np.ndarray, dim: int | None) -> list[dict]:
    """Per norm: gamma and beta at the dimension (along u: |gamma * u| / |u| and beta . u), and per
    projection its output feeds, how strongly its weight reads the dimension (the weight column's
    norm times |gamma_d|; along u: |W (gamma * u)| / |u|) against the median column."""
    wired = wiring(loaded)
    named = dict(loaded.model.named_modules())
    unit = u / np.linalg.norm(u)
    out = []
    for norm in wired.norms:
        module = named[norm.path]
        gamma, beta, _ = norm_parameters(module, norm, norm.width)
        if norm.width != len(u):
            continue
        entry: dict[str, Any] = {
            "norm": norm.path,
            "role": norm.role,
            "layer": None if norm.layer is None else norm.layer + 1,
            "gamma": float(gamma[dim]) if dim is not None else float(np.linalg.norm(gamma * unit)),
            "gamma_median_abs": float(np.median(np.abs(gamma))),
            "beta": None if beta is None else float(beta @ unit),
            "projections": [],
        }
        for path in norm.feeds:
            proj = named.get(path)
            if proj is None:  # not a module of the model: nothing reads the dimension there
                continue
            try:
                w = weight_matrix(proj).detach()  # (out, in), on the model's device
            except (AttributeError, TypeError):
                continue
            if w.ndim != 2 or w.shape[1] != len(u):
                continue
            g = torch.as_tensor(gamma, dtype=torch.float32, device=w.device)
            norms = torch.linalg.vector_norm(w.float(), dim=0) * g.abs()
            columns = to_numpy(norms)  # (in,)
            if dim is not None:
                reads = float(columns[dim])
            else:
                along = torch.as_tensor(gamma * unit, dtype=torch.float32, device=w.device)
                reads = float(torch.linalg.vector_norm(w.float() @ along))
            median = float(np.median(columns))
            entry["projections"].append(
                {
                    "projection": path,
                    "column_norm": reads,
                    "median_column": median,
                    "ratio": reads / median if median > 0 else None,
                }
            )
        out.append(entry)
    return out


def _geometry(u, dim, result: PassResult, raw_value: np.ndarray) -> dict:
    """Cosine share (Timkey & van Schijndel 2021) on pairs of the sampled tokens, variance share,
    and the massive-activation and int8 rules at the chosen state."""
    n = len(raw_value)
    unit_u = u / np.linalg.norm(u)
    mean = result.state_sum / max(n, 1)
    variance = result.state_sumsq / max(n, 1) - mean**2
    total_var = float(variance.sum())
    var_u = float(np.var(raw_value)) / float(u @ u)
    sample = result.sample
    cosine_share = None
    mean_cosine = None
    if len(sample) >= 4:
        rng = np.random.default_rng(0)
        perm = rng.permutation(len(sample))
        pairs = np.column_stack(
            [perm[: len(perm) // 2], perm[len(perm) // 2 : 2 * (len(perm) // 2)]]
        )
        unit = unit_rows(sample)
        cosines, per_dim = pair_terms(unit, pairs)
        mean_cosine = float(cosines.mean())
        along = (unit[pairs[:, 0]] @ unit_u) * (unit[pairs[:, 1]] @ unit_u)
        share_value = float(per_dim[dim]) if dim is not None else float(along.mean())
        cosine_share = share_value / mean_cosine if abs(mean_cosine) > 1e-12 else None
    median_abs = float(np.median(np.abs(sample))) if len(sample) else None
    max_abs = float(np.abs(raw_value).max(initial=0.0))
    massive = bool(
        median_abs is not None
        and max_abs > MASSIVE_ABS_THRESHOLD
        and max_abs > MASSIVE_MEDIAN_RATIO * median_abs
    )
    int8_share = float((np.abs(raw_value) >= LLM_INT8_THRESHOLD).mean()) if n else 0.0
    return {
        "mean_cosine": mean_cosine,
        "cosine_share": cosine_share,
        "variance_share": var_u / total_var if total_var > 0 else None,
        "max_abs": max_abs,
        "median_abs_of_state": median_abs,
        "massive": massive,
        "int8_token_share": int8_share,
    }
