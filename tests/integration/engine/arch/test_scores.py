"""Softmax attention read from what a module computes (backend/engine/arch/scores.py): tiny random
checkpoints of families with their own attention code, saved and loaded through the real loader,
and small synthetic modules for the shapes no family in transformers has (q and k held as
parameters in a sequence-first einsum with a relative-position term, a head size that differs by
layer, a padding-only mask, grouped keys through scaled_dot_product_attention). The captured q, k
and weights are checked against an independent computation from the modules' weights and
against the model's own attention weights."""

from __future__ import annotations

import math
from contextlib import nullcontext
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from isoscope.analysis.massive.sinks import eager_attention
from isoscope.engine.arch import layer_pattern, pattern_sentence
from isoscope.engine.arch.qk_capture import block_index
from isoscope.engine.arch.scores import score_calls
from isoscope.engine.load.models import load_model
from tests import own_attention

TEXTS = ["the cat sat on the w3 . w7 w9", "a dog , the w1 w2"]


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("own-attention")
    return {f: own_attention.build(f, root / f) for f in own_attention.FAMILIES}


def _run(loaded, output_attentions: bool = True):
    enc = loaded.tokenizer(TEXTS, return_tensors="pt", padding=True)
    calls: list = []
    with (
        torch.inference_mode(),
        eager_attention(loaded.model),
        score_calls(loaded.encoder, calls.append),
    ):
        out = loaded.encoder(**enc, output_attentions=output_attentions, output_hidden_states=True)
    return enc, calls, out


@pytest.mark.parametrize("family", list(own_attention.FAMILIES))
def test_one_call_per_layer_with_the_models_own_weights(family, family_dirs):
    loaded = load_model(str(family_dirs[family]), device="cpu")
    # Falcon returns weights only on its matmul path, whose mask is built for SDPA (the capture
    # reads the SDPA call it really makes); SqueezeBERT returns its scores before the softmax
    own = family not in ("falcon", "squeezebert")
    enc, calls, out = _run(loaded, output_attentions=own)
    index = block_index(loaded.model)
    assert [index[c.module] for c in calls] == [0, 1]
    batch, tokens = enc["input_ids"].shape
    for i, call in enumerate(calls):
        assert call.q.shape == (batch, 4, tokens, 16) and call.k.shape == call.q.shape
        assert call.weights.shape == (batch, 4, tokens, tokens)
        torch.testing.assert_close(
            call.weights.sum(-1).double(),
            torch.ones(batch, 4, tokens, dtype=torch.float64),
            atol=1e-6,
            rtol=0,
        )
        if own:
            torch.testing.assert_close(
                call.weights.float(), out.attentions[i].float(), atol=1e-6, rtol=1e-5
            )
        hidden_keys = call.weights[1, :, :, enc["attention_mask"][1] == 0]
        assert bool((hidden_keys == 0).all()), "padding keys get no weight"


def _recomputed(family, loaded, hidden, i, batch, tokens):
    """q, k (B, H, T, d) of layer ``i`` from the module's weights and the layer's input."""
    base = loaded.encoder
    heads = lambda x: x.reshape(batch, tokens, 4, -1).transpose(1, 2)  # noqa: E731
    if family == "gpt_neo":
        block = base.h[i]
        x, attn = block.ln_1(hidden[i]), block.attn.attention
        return heads(attn.q_proj(x)), heads(attn.k_proj(x))
    if family == "xglm":
        block = base.layers[i]
        x, attn = block.self_attn_layer_norm(hidden[i]), block.self_attn
        return heads(attn.q_proj(x) * attn.scaling), heads(attn.k_proj(x))
    if family == "bloom":
        block = base.h[i]
        fused = block.self_attention.query_key_value(block.input_layernorm(hidden[i]))
        fused = fused.view(batch, tokens, 4, 3, 16)  # per head q | k | v
        return fused[..., 0, :].transpose(1, 2), fused[..., 1, :].transpose(1, 2)
    if family == "mpt":
        block = base.blocks[i]
        q, k, _ = block.attn.Wqkv(block.norm_1(hidden[i])).chunk(3, dim=-1)
        return heads(q), heads(k)
    if family == "xlm":  # post-norm, and the queries scaled before the product
        attn = base.attentions[i]
        return heads(attn.q_lin(hidden[i]) / math.sqrt(16)), heads(attn.k_lin(hidden[i]))
    raise AssertionError(family)


@pytest.mark.parametrize("family", ["gpt_neo", "xglm", "bloom", "mpt", "xlm"])
def test_captured_queries_and_keys_equal_the_projections(family, family_dirs):
    loaded = load_model(str(family_dirs[family]), device="cpu")
    enc, calls, out = _run(loaded)
    batch, tokens = enc["input_ids"].shape
    with torch.inference_mode():
        for i, call in enumerate(calls):
            q, k = _recomputed(family, loaded, out.hidden_states, i, batch, tokens)
            torch.testing.assert_close(call.q, q, atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(call.k, k, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(
    ("family", "sentence"),
    [
        ("gpt_neo", "2 layers: 1 full attention, 1 sliding-window attention"),
        ("gptj", "2 layers: full attention"),
        ("xlm", "2 layers: full attention"),  # blocks as parallel lists: the attention list
        ("squeezebert", "2 layers: full attention"),  # kernel-1 convolutions are projections
        ("bloom", "2 layers: full attention"),
    ],
)
def test_layer_kinds_come_from_the_scores(family, sentence, family_dirs):
    loaded = load_model(str(family_dirs[family]), device="cpu")
    assert pattern_sentence(layer_pattern(loaded)) == sentence


# ----------------------------------------------------------------------------- synthetic shapes

WIDTH, VOCAB = 32, 50


class ParameterAttention(nn.Module):
    """XLNet's shape: q, k, v held as (width, heads, d) parameters, a sequence-first (T, B, width)
    stream, the scores formed by einsum as a content term plus a position term, and a (B, 1, 1,
    T) padding mask."""

    def __init__(self, heads: int, head_dim: int):
        super().__init__()
        self.q = nn.Parameter(torch.randn(WIDTH, heads, head_dim) / WIDTH**0.5)
        self.k = nn.Parameter(torch.randn(WIDTH, heads, head_dim) / WIDTH**0.5)
        self.v = nn.Parameter(torch.randn(WIDTH, heads, head_dim) / WIDTH**0.5)
        self.positions = nn.Parameter(torch.randn(64, heads, head_dim))
        self.o = nn.Parameter(torch.randn(heads, head_dim, WIDTH) / WIDTH**0.5)
        self.seen: dict = {}

    def forward(self, h, mask):  # h (T, B, W), mask (B, T)
        q = torch.einsum("ibh,hnd->ibnd", h, self.q)
        k = torch.einsum("ibh,hnd->ibnd", h, self.k)
        v = torch.einsum("ibh,hnd->ibnd", h, self.v)
        content = torch.einsum("ibnd,jbnd->bnij", q, k)
        position = torch.einsum("ibnd,jnd->bnij", q, self.positions[: h.shape[0]])
        scores = (content + position) * q.shape[-1] ** -0.5
        scores = scores.masked_fill(~mask.bool()[:, None, None, :], -1e30)
        weights = scores.softmax(dim=-1)
        self.seen = {"q": q.permute(1, 2, 0, 3), "k": k.permute(1, 2, 0, 3), "weights": weights}
        return torch.einsum("bnij,jbnd,ndw->ibw", weights, v, self.o)


class GroupedSdpaAttention(nn.Module):
    """Four query heads sharing two key heads through ``scaled_dot_product_attention``."""

    def __init__(self, head_dim: int = 8):
        super().__init__()
        self.d = head_dim
        self.q_proj = nn.Linear(WIDTH, 4 * head_dim)
        self.kv_proj = nn.Linear(WIDTH, 4 * head_dim)
        self.o_proj = nn.Linear(4 * head_dim, WIDTH)
        self.seen: dict = {}

    def forward(self, h, mask):  # h (T, B, W)
        x = h.transpose(0, 1)
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, 4, self.d).transpose(1, 2)
        k, v = self.kv_proj(x).view(b, t, 2, 2 * self.d).transpose(1, 2).chunk(2, dim=-1)
        allowed = mask.bool()[:, None, None, :] & torch.ones(t, t, dtype=torch.bool).tril()
        out = nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=allowed, enable_gqa=True
        )
        self.seen = {"q": q, "k": k.repeat_interleave(2, dim=1), "allowed": allowed}
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1)).transpose(0, 1)


class Synthetic(nn.Module):
    """A model of the given attention layers over a sequence-first residual stream."""

    def __init__(self, layers: list[nn.Module]):
        super().__init__()
        self.config = SimpleNamespace(
            num_hidden_layers=len(layers), vocab_size=VOCAB, hidden_size=WIDTH
        )
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.layers = nn.ModuleList(layers)

    def forward(self, input_ids, attention_mask=None):
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        h = self.embed(input_ids).transpose(0, 1)
        for layer in self.layers:
            h = h + layer(h, mask)
        return h


SYNTHETIC = {
    "parameters, einsum, relative term": lambda: [
        ParameterAttention(4, 8),
        ParameterAttention(4, 8),
    ],
    "head size by layer": lambda: [ParameterAttention(4, 8), ParameterAttention(4, 16)],
    "grouped keys through SDPA": lambda: [GroupedSdpaAttention(), GroupedSdpaAttention()],
}


@pytest.mark.parametrize("name", list(SYNTHETIC))
def test_synthetic_attention_is_read_from_its_computation(name):
    torch.manual_seed(0)
    model = Synthetic(SYNTHETIC[name]()).eval()
    ids = torch.randint(0, VOCAB, (2, 7))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    calls: list = []
    with torch.inference_mode(), score_calls(model, calls.append):
        model(input_ids=ids, attention_mask=mask)
    assert [c.module for c in calls] == list(model.layers)
    for call, layer in zip(calls, model.layers, strict=True):
        if "allowed" in layer.seen:  # SDPA: the weights its arguments define
            q, k = layer.seen["q"].double(), layer.seen["k"].double()
            scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
            layer.seen["weights"] = scores.masked_fill(~layer.seen["allowed"], -math.inf).softmax(
                -1
            )
        torch.testing.assert_close(call.q.double(), layer.seen["q"].double())
        torch.testing.assert_close(call.k.double(), layer.seen["k"].double())
        torch.testing.assert_close(call.weights.double(), layer.seen["weights"].double())
    assert pattern_sentence(layer_pattern(model)) == "2 layers: full attention"


def test_a_softmax_that_is_not_attention_is_not_read():
    """A softmax over features (a gate), and a product of tokens by features, are no attention."""

    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Linear(WIDTH, WIDTH)

        def forward(self, h, mask):
            gate = self.w(h).softmax(-1)  # (T, B, W)
            mixed = torch.einsum("ibw,jbw->bij", h, h)  # (B, T, T) but never softmaxed
            return gate * h + 0 * mixed.sum()

    model = Synthetic([Gate(), Gate()]).eval()
    calls: list = []
    with torch.inference_mode(), score_calls(model, calls.append):
        model(input_ids=torch.randint(0, VOCAB, (1, 6)))
    assert calls == []


class ChunkedAttention(nn.Module):
    """Attention within chunks of ``chunk`` tokens (LongT5's local blocks, Reformer's chunks):
    a softmax over (B, chunks, chunk, chunk) scores, never over every pair of tokens; with
    ``log_sum_exp`` normalised as exp(x - logsumexp(x)), as Reformer does."""

    def __init__(self, chunk: int = 4, log_sum_exp: bool = False):
        super().__init__()
        self.chunk, self.log_sum_exp = chunk, log_sum_exp
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)

    def forward(self, h, mask):  # h (T, B, W), T a multiple of the chunk
        x = h.transpose(0, 1)
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t // self.chunk, self.chunk, 3 * WIDTH).chunk(3, -1)
        scores = q @ k.transpose(-1, -2)  # (B, chunks, chunk, chunk)
        if self.log_sum_exp:
            weights = torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))
        else:
            weights = scores.softmax(-1)
        return (weights @ v).reshape(b, t, WIDTH).transpose(0, 1)


class SoftmaxFree(nn.Module):
    """Token mixing with no softmax (a kernel approximation: exp features, a linear mix)."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)

    def forward(self, h, mask):
        q, k, v = self.qkv(h.transpose(0, 1)).chunk(3, -1)
        return ((q.exp() @ (k.exp().transpose(-1, -2) @ v)) / h.shape[0]).transpose(0, 1)


@pytest.mark.parametrize(
    ("layers", "normalised"),
    [
        (lambda: [ChunkedAttention(), ChunkedAttention()], True),
        (lambda: [ChunkedAttention(log_sum_exp=True), ChunkedAttention(2, True)], True),
        (lambda: [SoftmaxFree(), SoftmaxFree()], False),
    ],
    ids=["softmax over chunks", "log-sum-exp over chunks", "no softmax"],
)
def test_attention_over_parts_of_the_text_is_reported_not_read(layers, normalised):
    """No call, and each layer that normalises scores over chunks goes to ``on_other`` with
    the scores' shape (the queries/keys view names it in its refusal)."""
    torch.manual_seed(0)
    model = Synthetic(layers()).eval()
    calls: list = []
    other: list = []
    with torch.inference_mode(), score_calls(model, calls.append, lambda m, s: other.append(m)):
        model(input_ids=torch.randint(0, VOCAB, (2, 8)))
    assert calls == []
    assert set(other) == (set(model.layers) if normalised else set())


def test_an_error_of_the_models_own_code_under_the_scores_watch_is_a_refusal():
    """A forward that fails in the model's own code while the scores are watched (the torch
    function mode hands the call on) is refused in one line, as without the watch."""
    from isoscope.engine.errors import UnsupportedModelError
    from isoscope.engine.extraction import run_encoder

    model = Synthetic([ChunkedAttention(), ChunkedAttention()]).eval()
    info = SimpleNamespace(display_name="synthetic", architecture="Synthetic")
    loaded = SimpleNamespace(encoder=model, device="cpu", info=info)
    ids = torch.randint(0, VOCAB, (1, 7))  # 7 tokens: no whole chunks of 4
    for watch in (False, True):
        with torch.inference_mode(), score_calls(model, lambda c: None) if watch else nullcontext():
            with pytest.raises(UnsupportedModelError, match="its own forward pass fails"):
                run_encoder(loaded, ids, torch.ones_like(ids))
