"""TUPE decomposition of first-layer attention logits (Ke, He & Liu 2021, arXiv 2006.15595, eq. 6).

With absolute position embeddings the first layer sees x = w + p + s (word, position, segment).
BERT normalises x with the embedding LayerNorm; with each token's own mean mu and std sigma
(biased variance + eps, exactly as nn.LayerNorm), and means taken over dims per token,

    LN(x) = gamma*(w - mean(w))/sigma + gamma*(p - mean(p))/sigma + gamma*(s - mean(s))/sigma + beta

holds exactly (the three means add up to mu). Calling the parts a_w, a_p and r (segment + beta),
the query is q = W_Q a_w + W_Q a_p + (W_Q r + b_Q), the key likewise, and per head

    logit_ij = (q_i . k_j) / sqrt(d_head) = ww + wp + pw + pp + remainder

with ww = q_w,i . k_w,j etc., and the remainder collecting every product that involves the
segment embedding, LN beta or the projection biases. GPT-2 is pre-LN: layer 1's ``ln_1`` sees
w + p and splits the same way (no segment). Self-test: the terms are computed in float64 and
compared with the logits recomputed from the outputs of the model's *real* query/key modules
(captured by forward hooks) on the real input; ``max_abs_error`` should be ~1e-5 or less.

TUPE's observations: the mixed word-position terms are small/near uniform, and [CLS] should not
be tied to a position, so the [CLS] row (i = 0) and column (j = 0) are reported separately.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch

from isoscope.engine.arch import architecture
from isoscope.engine.arch.hooks import forward_hooks
from isoscope.engine.budget.progress import Progress
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError, UnsupportedModelError
from isoscope.engine.extraction import tokenize
from isoscope.engine.load.models import LoadedModel

TERMS = ("word_word", "word_position", "position_word", "position_position")
TERM_LABELS = {
    "word_word": "word → word",
    "word_position": "word → position",
    "position_word": "position → word",
    "position_position": "position → position",
    "remainder": "remainder (segment, LN β, biases)",
}
REGIONS = ("all", "cls_row", "cls_column", "body")


class _Stop(Exception):
    """Raised by the last hook to skip the rest of the forward pass."""


@dataclass(frozen=True)
class _Parts:
    """Where the pieces live in one architecture."""

    kind: str  # "bert" | "gpt2"
    word: torch.nn.Module
    position: torch.nn.Module
    segment: torch.nn.Module | None
    norm: torch.nn.LayerNorm
    qk_modules: tuple[torch.nn.Module, ...]  # (query, key) for BERT, (c_attn,) for GPT-2
    num_heads: int
    head_dim: int
    scaling: float


def _locate(loaded: LoadedModel) -> _Parts:
    """The TUPE pieces from the architecture map: post-LN encoders with an embedding LayerNorm and
    separate query/key modules ("bert"), or pre-LN GPT-2 with its fused ``c_attn`` ("gpt2")."""
    try:
        arch = architecture(loaded)
    except UnsupportedModelError as exc:
        raise UnsupportedModelError(
            f"the TUPE decomposition cannot read this model: {exc}"
        ) from exc
    if arch.absolute_position_table is None:
        raise UnsupportedModelError(
            f"{loaded.info.source!r} has no learned absolute position table (position embeddings: "
            f"{loaded.info.position_embedding}); the TUPE decomposition splits word and position "
            "embeddings, so it needs a BERT- or GPT-2-style model with absolute positions"
        )
    first = arch.layers[0]
    heads, head_dim = arch.num_heads, arch.head_dim
    if not arch.pre_ln and arch.embedding_norm is not None:
        if first.query is None or first.key is None:
            raise UnsupportedModelError(
                f"{loaded.info.architecture}: layer 1 has no separate query/key modules; the TUPE "
                "view supports BERT-family encoders and GPT-2"
            )
        if arch.word_embeddings.embedding_dim != loaded.info.hidden_size:
            raise UnsupportedModelError(
                f"{loaded.info.architecture} projects its embeddings (ALBERT-style); the TUPE split "
                "needs word + position embeddings of the hidden width"
            )
        return _Parts(
            "bert",
            arch.word_embeddings,
            arch.absolute_position_table,
            arch.token_type_table,
            cast(torch.nn.LayerNorm, arch.embedding_norm),
            (first.query, first.key),
            heads,
            head_dim,
            arch.scaling(first),
        )
    if arch.pre_ln and first.fused_qkv is not None:
        return _Parts(
            "gpt2",
            arch.word_embeddings,
            arch.absolute_position_table,
            None,
            cast(torch.nn.LayerNorm, dict(first.norms)["pre_attn"]),
            (first.fused_qkv,),
            heads,
            head_dim,
            arch.scaling(first),
        )
    raise UnsupportedModelError(
        f"the TUPE decomposition supports BERT-family encoders (post-embedding LayerNorm) and GPT-2 "
        f"(pre-LN ln_1); {loaded.info.architecture} ({loaded.info.model_type}) is neither"
    )


@dataclass(frozen=True)
class TupeText:
    """The decomposition of one text. Arrays are float64 (H, T, T), row i = query, column j = key.

    ``terms`` maps each of TERMS and "remainder" to its logits; ``real`` are the model's own
    logits (from the hooked query/key outputs); ``valid`` (T, T) marks the pairs the model
    attends (all for BERT, j <= i for GPT-2).
    """

    tokens: list[str]
    terms: dict[str, np.ndarray]
    real: np.ndarray
    valid: np.ndarray
    ln_error: float

    @property
    def total(self) -> np.ndarray:
        return cast(np.ndarray, sum(self.terms.values()))  # TERMS and "remainder": never empty

    @property
    def max_abs_error(self) -> float:
        return float(np.abs(self.total - self.real)[:, self.valid].max())


def _to64(t: torch.Tensor) -> np.ndarray:
    return to_numpy(t, torch.float64)


def _linear64(module: torch.nn.Module) -> tuple[np.ndarray, np.ndarray]:
    """(W (in, out), b (out,)) in float64 for nn.Linear or GPT-2's Conv1D."""
    weight = _to64(cast(torch.Tensor, module.weight))
    if isinstance(module, torch.nn.Linear):
        weight = weight.T
    bias = (
        _to64(cast(torch.Tensor, module.bias))
        if getattr(module, "bias", None) is not None
        else np.zeros(weight.shape[1])
    )
    return weight, bias


def decompose_ids(loaded: LoadedModel, input_ids: np.ndarray) -> TupeText:
    """TUPE decomposition of one tokenized text (1-D ids, no padding)."""
    parts = _locate(loaded)
    captured = _capture(loaded, parts, input_ids)
    seq, d = len(input_ids), loaded.info.hidden_size
    word = _to64(captured["word"]).reshape(-1, seq, d)[0]
    pos = np.broadcast_to(_to64(captured["position"]).reshape(-1, seq, d)[0], (seq, d))
    seg = (
        np.broadcast_to(_to64(captured["segment"]).reshape(-1, seq, d)[0], (seq, d))
        if "segment" in captured
        else np.zeros((seq, d))
    )
    ln_out, q_real, k_real, (wq, bq, wk, bk) = _query_key_inputs(parts, captured, d)
    a_word, a_pos, rest = _layernorm_split(parts, word, pos, seg)
    ln_error = float(np.abs(a_word + a_pos + rest - ln_out).max())

    def heads(v: np.ndarray) -> np.ndarray:  # (T, H*dh) -> (H, T, dh)
        return v.reshape(seq, parts.num_heads, parts.head_dim).transpose(1, 0, 2)

    qw, qp, qr = heads(a_word @ wq), heads(a_pos @ wq), heads(rest @ wq + bq)
    kw, kp, kr = heads(a_word @ wk), heads(a_pos @ wk), heads(rest @ wk + bk)
    s = parts.scaling

    def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:  # (H, T, dh) x (H, T, dh) -> (H, T, T)
        return np.einsum("hid,hjd->hij", a, b) * s

    terms = {
        "word_word": dot(qw, kw),
        "word_position": dot(qw, kp),
        "position_word": dot(qp, kw),
        "position_position": dot(qp, kp),
        "remainder": dot(qr, kw + kp + kr) + dot(qw + qp, kr),
    }
    real = dot(heads(q_real), heads(k_real))
    valid = (
        np.tril(np.ones((seq, seq), dtype=bool))
        if parts.kind == "gpt2"
        else np.ones((seq, seq), dtype=bool)
    )
    tokens = loaded.tokenizer.convert_ids_to_tokens([int(i) for i in input_ids])
    return TupeText(tokens=list(tokens), terms=terms, real=real, valid=valid, ln_error=ln_error)


def _capture(loaded: LoadedModel, parts, input_ids: np.ndarray) -> dict[str, Any]:
    """The embeddings' outputs and the first layer's query/key inputs and outputs of one forward
    pass, stopped once they are seen."""
    captured: dict[str, Any] = {}

    def save(name: str, stop: bool = False):
        def hook(module, args, output):
            captured[name] = output
            captured[name + "_in"] = args[0] if args else None
            if stop:
                raise _Stop

        return hook

    hooks = {parts.word: save("word"), parts.position: save("position")}
    if parts.segment is not None:
        hooks[parts.segment] = save("segment")
    if parts.kind == "bert":
        hooks[parts.qk_modules[0]] = save("query")
        hooks[parts.qk_modules[1]] = save("key", stop=True)
    else:
        hooks[parts.qk_modules[0]] = save("qkv", stop=True)
    with forward_hooks(hooks):
        ids = torch.as_tensor(np.asarray(input_ids, dtype=np.int64)[None], device=loaded.device)
        try:
            with torch.inference_mode():
                loaded.encoder(input_ids=ids, attention_mask=torch.ones_like(ids))
        except _Stop:
            pass
    return captured


def _query_key_inputs(parts, captured: dict[str, Any], d: int):
    """The LayerNorm's output, the real queries and keys, and (Wq, bq, Wk, bk) in float64."""
    if parts.kind == "bert":
        ln_out = _to64(captured["query_in"])[0]
        q_real = _to64(captured["query"])[0]
        k_real = _to64(captured["key"])[0]
        wq, bq = _linear64(parts.qk_modules[0])
        wk, bk = _linear64(parts.qk_modules[1])
        return ln_out, q_real, k_real, (wq, bq, wk, bk)
    ln_out = _to64(captured["qkv_in"])[0]
    qkv = _to64(captured["qkv"])[0]
    w, b = _linear64(parts.qk_modules[0])
    weights = (w[:, :d], b[:d], w[:, d : 2 * d], b[d : 2 * d])
    return ln_out, qkv[:, :d], qkv[:, d : 2 * d], weights


def _layernorm_split(parts, word: np.ndarray, pos: np.ndarray, seg: np.ndarray):
    """LayerNorm of word + position + segment split into its word part, its position part and
    the rest (segment and bias), with each token's own statistics (float64, biased variance
    like nn.LayerNorm)."""
    d = word.shape[1]
    x = word + pos + seg
    sigma = np.sqrt(x.var(axis=1) + parts.norm.eps)[:, None]  # (T, 1)
    gamma = _to64(parts.norm.weight)
    beta = _to64(parts.norm.bias) if parts.norm.bias is not None else np.zeros(d)
    a_word = gamma * (word - word.mean(axis=1, keepdims=True)) / sigma
    a_pos = gamma * (pos - pos.mean(axis=1, keepdims=True)) / sigma
    rest = gamma * (seg - seg.mean(axis=1, keepdims=True)) / sigma + beta
    return a_word, a_pos, rest


def decompose_text(loaded: LoadedModel, text: str, max_length: int = 64) -> TupeText:
    """TUPE decomposition of one raw text (truncated to ``max_length`` tokens)."""
    tokenized = tokenize(loaded, (text,), max_length)
    return decompose_ids(loaded, tokenized.input_ids[0])


def region_masks(valid: np.ndarray) -> dict[str, np.ndarray]:
    """Boolean (T, T) masks: all pairs, the first token's row / column, and the rest."""
    seq = valid.shape[0]
    row = np.zeros_like(valid)
    row[0, :] = True
    col = np.zeros_like(valid)
    col[1:, 0] = True
    body = np.zeros_like(valid)
    body[1:, 1:] = True
    return (
        {"all": valid, "cls_row": row & valid, "cls_column": col & valid, "body": body & valid}
        if seq
        else {}
    )


@dataclass(frozen=True)
class TupeSummary:
    """Mean |term| over texts, heads and attended pairs, per region and per head.

    ``mean_abs[region][term]``: float; ``mean_abs_by_head[term]``: (H,) over all pairs;
    ``term_share``: mean|term| / sum over the four TERMS (remainder excluded), all pairs;
    ``remainder_share``: mean|remainder| / sum over all five.
    """

    num_texts: int
    num_heads: int
    max_abs_error: float
    max_abs_logit: float
    ln_error: float
    mean_abs: dict[str, dict[str, float]]
    mean_abs_by_head: dict[str, np.ndarray]
    kind: str

    def term_share(self, region: str = "all") -> dict[str, float]:
        total = sum(self.mean_abs[region][t] for t in TERMS) or 1.0
        return {t: self.mean_abs[region][t] / total for t in TERMS}

    def remainder_share(self, region: str = "all") -> float:
        total = sum(self.mean_abs[region].values()) or 1.0
        return self.mean_abs[region]["remainder"] / total

    def head_share(self) -> np.ndarray:
        """(H, 4) term shares per head (all pairs)."""
        stack = np.stack([self.mean_abs_by_head[t] for t in TERMS], axis=1)
        return stack / np.maximum(stack.sum(axis=1, keepdims=True), 1e-300)

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_abs_error": self.max_abs_error,
            "max_abs_logit": self.max_abs_logit,
            "ln_reconstruction_error": self.ln_error,
            "term_share": self.term_share("all"),
            "term_share_by_region": {r: self.term_share(r) for r in REGIONS},
            "remainder_share": self.remainder_share("all"),
            "term_share_by_head": self.head_share().tolist(),
            "num_texts": self.num_texts,
            "num_heads": self.num_heads,
            "first_token_is": "[CLS]" if self.kind == "bert" else "first token",
        }


def tupe_summary(
    loaded: LoadedModel,
    texts: tuple[str, ...] | list[str],
    max_length: int = 64,
    max_texts: int = 32,
    progress: Progress | None = None,
) -> TupeSummary:
    """Decompose the first ``max_texts`` texts and aggregate term magnitudes (see TupeSummary)."""
    if not texts:
        raise InputError("the TUPE decomposition needs at least one text")
    if max_texts < 1:
        raise InputError("max texts must be at least 1")
    parts = _locate(loaded)
    chosen = list(texts)[:max_texts]
    tokenized = tokenize(loaded, tuple(chosen), max_length)
    names = (*TERMS, "remainder")
    sums = {r: dict.fromkeys(names, 0.0) for r in REGIONS}
    counts = dict.fromkeys(REGIONS, 0)
    by_head = {t: np.zeros(parts.num_heads) for t in names}
    head_count = 0
    max_err = max_logit = ln_err = 0.0
    for i, ids in enumerate(tokenized.input_ids):
        part = decompose_ids(loaded, ids)
        max_err = max(max_err, part.max_abs_error)
        max_logit = max(max_logit, float(np.abs(part.real)[:, part.valid].max()))
        ln_err = max(ln_err, part.ln_error)
        for region, mask in region_masks(part.valid).items():
            n = int(mask.sum())
            counts[region] += n * parts.num_heads
            for t in names:
                sums[region][t] += float(np.abs(part.terms[t][:, mask]).sum())
        for t in names:
            by_head[t] += np.abs(part.terms[t][:, part.valid]).sum(axis=1)
        head_count += int(part.valid.sum())
        if progress is not None:
            progress(i + 1, len(tokenized.input_ids))
    mean_abs = {r: {t: sums[r][t] / max(counts[r], 1) for t in names} for r in REGIONS}
    return TupeSummary(
        num_texts=len(tokenized.input_ids),
        num_heads=parts.num_heads,
        max_abs_error=max_err,
        max_abs_logit=max_logit,
        ln_error=ln_err,
        mean_abs=mean_abs,
        mean_abs_by_head={t: by_head[t] / max(head_count, 1) for t in names},
        kind=parts.kind,
    )


def supports_tupe(loaded: LoadedModel) -> str | None:
    """None when the model is supported, else the reason (for greying out the view)."""
    try:
        _locate(loaded)
    except UnsupportedModelError as exc:
        return str(exc)
    return None
