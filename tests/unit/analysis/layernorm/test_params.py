"""LayerNorm discovery, canonical names and BERT-Busters outlier detection on planted parameters."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.layernorm.params import (
    detect_outliers,
    find_norms,
    flag_params,
    ln_params,
    needed_layers,
    select_norms,
)
from isoscope.engine.errors import InputError, UnsupportedModelError
from isoscope.engine.load.models import build_random_model

VOCAB = 100


def tiny(family: str = "bert", head: str = "base", layers: int = 4, width: int = 32):
    return build_random_model(
        family, {"layers": layers, "width": width, "heads": 2, "seed": 0}, VOCAB, head=head
    )


def test_bert_names_and_roles():
    sites = find_norms(tiny(layers=2))
    assert [s.name for s in sites] == [
        "emb.ln",
        "L1.attn_ln",
        "L1.out_ln",
        "L2.attn_ln",
        "L2.out_ln",
    ]
    assert sites[2].path == "encoder.layer.0.output.LayerNorm"
    assert [s.role for s in select_norms(sites, None)] == ["out", "out"]


def test_mlm_head_is_named_and_only_used_on_request():
    sites = find_norms(tiny(head="mlm", layers=2))
    assert sites[-1].name == "head.ln" and sites[-1].path == "cls.predictions.transform.LayerNorm"
    assert "head.ln" not in [s.name for s in select_norms(sites, "all")]
    assert [s.name for s in select_norms(sites, ["out", "head"])][-1] == "head.ln"


def test_gpt2_is_pre_ln():
    sites = find_norms(tiny("gpt2", layers=2))
    assert [(s.name, s.path) for s in sites] == [
        ("L1.pre_attn_ln", "h.0.ln_1"),
        ("L1.pre_mlp_ln", "h.0.ln_2"),
        ("L2.pre_attn_ln", "h.1.ln_1"),
        ("L2.pre_mlp_ln", "h.1.ln_2"),
        ("final_ln", "ln_f"),
    ]
    assert {s.role for s in select_norms(sites, None)} == {"pre_attn", "pre_mlp"}


def test_no_norms_is_a_clear_error():
    class NoNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.config = type(
                "C", (), {"num_hidden_layers": 1, "hidden_size": 8, "model_type": "toy"}
            )()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(8, 8)])

    with pytest.raises(UnsupportedModelError, match="no LayerNorm"):
        find_norms(NoNorm())


def test_unknown_norm_name_is_input_error():
    with pytest.raises(InputError, match="unknown LayerNorm"):
        select_norms(find_norms(tiny(layers=2)), "L9.out_ln")


def test_random_init_gives_no_outliers_and_no_warnings():
    sites = find_norms(tiny())
    with np.errstate(all="raise"):
        found = detect_outliers(ln_params(sites))
    assert found.dims == []
    assert not found.weight_flags.any() and not found.bias_flags.any()


def test_zero_std_rows_flag_nothing():
    values = np.stack([np.ones(16), np.zeros(16), np.full(16, 1e-33)])
    with np.errstate(all="raise"):
        assert not flag_params(values).any()


def test_planted_outliers_are_detected():
    model = tiny(layers=4)
    out = [s for s in find_norms(model) if s.role == "out"]
    with torch.no_grad():
        for s in out[:3]:  # gamma of dim 5 in 3 of 4 layers
            s.module.weight[5] = 8.0
        for s in out[1:3]:  # beta of dim 9 in 2 of 4 layers (= half)
            s.module.bias[9] = -5.0
        out[0].module.weight[20] = 6.0  # only one layer: not an outlier at share 0.5
        for s in out:  # give every norm some spread so the z-score is meaningful
            s.module.weight.add_(0.01 * torch.randn(32, generator=torch.Generator().manual_seed(0)))
    found = detect_outliers(ln_params(out), k=3, share=0.5)
    assert found.dims == [5, 9]
    table = {row["dim"]: row for row in found.table()}
    assert table[5]["weight_layers"] == 3 and table[9]["bias_layers"] == 2
    assert found.weight_flags[0, 20]
    assert detect_outliers(ln_params(out), k=3, share=0.75).dims == [5]
    assert detect_outliers(ln_params(out), k=3, share=0.25).dims == [5, 9, 20]


def test_needed_layers_rounds_up():
    assert needed_layers(6, 0.5) == 3
    assert needed_layers(5, 0.5) == 3
    assert needed_layers(12, 0.01) == 1


def test_bad_thresholds():
    params = ln_params(find_norms(tiny(layers=2)))
    with pytest.raises(InputError):
        detect_outliers(params, k=0)
    with pytest.raises(InputError):
        detect_outliers(params, share=1.5)


def test_figures_mark_flags_and_keep_the_embedding_state():
    from types import SimpleNamespace

    from isoscope.plots.layernorm import (
        ablation_vs_controls,
        overlap_figure,
        param_heatmap,
        sweep_bar,
    )

    model = tiny(layers=2)
    out = [s for s in find_norms(model) if s.role == "out"]
    with torch.no_grad():
        for s in out:
            s.module.weight[5] = 9.0
    params = ln_params(find_norms(model))
    found = detect_outliers(params)
    fig = param_heatmap(params, found.weight_flags, "gamma", "z-score", found.dims)
    assert fig.data[0].z.shape == (5, 32)
    assert sorted(fig.data[1].x.tolist()) == [5, 5]  # one circle per flagged LN
    names = ["emb", "1", "2"]
    fig = overlap_figure([5], names, [[], [5, 7], []], 32)
    assert list(fig.data[0].marker.color) == ["#d62728", "#1f77b4"]
    assert fig.layout.yaxis.type == "category" and list(fig.data[-1].y) == names
    effect = SimpleNamespace(embedding_cosine=np.array([1.0, 0.8, 0.7]))
    controls = [([1], SimpleNamespace(embedding_cosine=np.array([1.0, 0.99, 0.98])))] * 2
    report = SimpleNamespace(
        dims=[5],
        state_names=names,
        effect=effect,
        controls=controls,
        control_values=lambda key: np.array([getattr(e, key) for _, e in controls]),
    )
    fig = ablation_vs_controls(report, "embedding_cosine")
    assert fig.layout.xaxis.type == "category" and list(fig.data[1].x) == names
    assert len(fig.data[0].y) == 6  # 2 controls x 3 states
    sweep = SimpleNamespace(
        dims=np.arange(4),
        embedding_cosine=np.array([[1, 1.0], [1, 0.5], [1, 0.9], [1, 1.0]]),
        token_cosine=np.ones((4, 2)),
        mlm_loss=None,
        state_names=["emb", "1"],
        num_texts=2,
        complete=True,
    )
    fig = sweep_bar(sweep, -1, "embedding_drift", highlight=[1])
    assert (
        fig.data[0].y.tolist() == [0.0, 0.5, 0.09999999999999998, 0.0]
        and fig.data[0].marker.color[1] == "#d62728"
    )


def _other_architectures():
    from transformers import (
        DistilBertConfig,
        DistilBertForMaskedLM,
        ElectraConfig,
        ElectraModel,
        LlamaConfig,
        LlamaModel,
        RobertaConfig,
        RobertaForMaskedLM,
    )

    small = dict(
        vocab_size=100,
        num_hidden_layers=2,
        hidden_size=32,
        num_attention_heads=2,
        intermediate_size=64,
    )
    return {
        "distilbert": (
            DistilBertForMaskedLM(
                DistilBertConfig(vocab_size=100, n_layers=2, dim=32, n_heads=2, hidden_dim=64)
            ),
            "distilbert.transformer.layer.1.output_layer_norm",
            "vocab_layer_norm",
        ),
        "roberta": (
            RobertaForMaskedLM(RobertaConfig(**small)),
            "roberta.encoder.layer.1.output.LayerNorm",
            "lm_head.layer_norm",
        ),
        "electra": (
            ElectraModel(ElectraConfig(embedding_size=32, **small)),
            "encoder.layer.1.output.LayerNorm",
            None,
        ),
        "llama (RMSNorm, pre-LN)": (
            LlamaModel(LlamaConfig(num_key_value_heads=2, **small)),
            "layers.1.post_attention_layernorm",
            None,
        ),
    }


@pytest.mark.parametrize("family", ["distilbert", "roberta", "electra", "llama (RMSNorm, pre-LN)"])
def test_other_architectures_map_onto_the_same_names(family):
    model, second_layer_path, head_path = _other_architectures()[family]
    by_name = {s.name: s for s in find_norms(model)}
    key = "L2.pre_mlp_ln" if "llama" in family else "L2.out_ln"
    assert by_name[key].path == second_layer_path
    assert ("head.ln" in by_name) == (head_path is not None)
    if head_path:
        assert by_name["head.ln"].path == head_path
    if "llama" in family:
        assert by_name["final_ln"].path == "norm" and not by_name[key].has_bias
        assert (
            detect_outliers(ln_params(list(by_name.values()))).dims == []
        )  # RMSNorm init: weight 1, no beta


def test_layernorm_thresholds_are_declared_once():
    """k = 3, share = 0.5 live in LayerNormThresholds; detection, the trajectory figures and the
    ablate command's options all default to it, and it validates its values."""
    import argparse
    import inspect

    from isoscope.analysis.compare.trajectory import layernorm_figures
    from isoscope.analysis.layernorm import params
    from isoscope.commands import ablate

    t = params.LayerNormThresholds()
    assert (t.k, t.share) == (3.0, 0.5) and params.LN_THRESHOLDS == t
    for fn in (params.detect_outliers, params.ln_outliers, layernorm_figures):
        sig = inspect.signature(fn).parameters
        assert (sig["k"].default, sig["share"].default) == (t.k, t.share), fn.__name__
    sub = argparse.ArgumentParser().add_subparsers()
    ablate.add_parser(sub)
    parsed = sub.choices["ablate"].parse_args(["--texts", "x", "--out", "y"])
    assert (parsed.k, parsed.share) == (t.k, t.share)
    with pytest.raises(InputError):
        params.LayerNormThresholds(k=0)
    with pytest.raises(InputError):
        params.LayerNormThresholds(share=1.5)
