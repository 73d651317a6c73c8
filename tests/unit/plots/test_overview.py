"""The Overview's model card rows and anisotropy line (backend/plots/overview.py)."""

from __future__ import annotations

import numpy as np

from isoscope.plots.overview import anisotropy_line, model_card_rows

CARD = {
    "source": "/ckpt/copy",
    "display_name": "/ckpt/copy",
    "path": "/abs/ckpt/copy",
    "architecture": "BertModel",
    "model_type": "bert",
    "num_layers": 2,
    "hidden_size": 32,
    "num_heads": 2,
    "num_parameters": 2_500_000,
    "position_embedding": "absolute (learned)",
    "is_causal": False,
    "random_init": False,
    "device": "cpu · float32",
}


def _rows(card: dict) -> dict[str, str]:
    rows = model_card_rows(card)
    assert all(set(row) == {"field", "value"} for row in rows)
    return {row["field"]: row["value"] for row in rows}


def test_the_card_names_the_opened_path_and_reads_its_fields():
    rows = _rows(CARD)
    assert list(rows)[:2] == ["name", "path"]
    assert rows["path"] == "/abs/ckpt/copy"
    assert rows["architecture"] == "BertModel (bert)"
    assert rows["parameters"] == "2.5 M"
    assert rows["attention"] == "bidirectional (encoder)" and rows["weights"] == "trained"
    assert "statistics" not in rows and "Hub revision" not in rows and "layers placed" not in rows


def test_revision_reuse_and_placement_rows_appear_only_when_the_card_has_them():
    card = CARD | {
        "revision": "0" * 40,
        "is_causal": True,
        "random_init": True,
        "device_map": "cuda:0: embeddings … layers.3 · cuda:1: layers.4 … norm",
        "reused_from": {"fingerprint": "abcdef0123456789abcd", "path": "/abs/ckpt/first"},
    }
    rows = _rows(card)
    assert rows["Hub revision"] == "0" * 40
    assert list(rows)[:3] == ["name", "path", "Hub revision"]
    assert rows["statistics"] == (
        "reused from an identical checkpoint, fingerprint abcdef012345…, computed from /abs/ckpt/first"
    )
    assert rows["attention"] == "causal (decoder)" and rows["weights"] == "random init"
    assert rows["layers placed"].startswith("cuda:0")


def test_an_old_card_without_a_name_or_parameters_still_reads():
    rows = _rows({"source": "default"})
    assert rows["name"] == "default" and rows["parameters"] == "?" and "path" not in rows


def test_anisotropy_line_keeps_every_state_on_a_category_axis():
    values = np.array([0.9, 0.4, -0.2])
    fig = anisotropy_line(["emb", "1", "2"], values)
    (trace,) = fig.data
    assert list(trace.x) == ["emb", "1", "2"] and list(trace.y) == [0.9, 0.4, -0.2]
    assert fig.layout.xaxis.type == "category"
    assert fig.layout.yaxis.range == (-0.25, 1.0)  # a negative state stays on screen
    assert anisotropy_line(["emb"], np.array([0.3])).layout.yaxis.range == (0.0, 1.0)


def test_the_layer_pattern_follows_the_layer_count_when_the_card_has_one():
    sentence = "4 layers: 2 Gated DeltaNet, 2 full attention"
    rows = _rows(CARD | {"layer_pattern": sentence})
    assert rows["layer pattern"] == sentence
    assert list(rows).index("layer pattern") == list(rows).index("layers") + 1
    assert "layer pattern" not in _rows(
        CARD
    )  # older cards, and models whose layers share one module
