"""A feature's card (isoscope.analysis.sae.card) on a tiny BERT with a planted outlier dimension:
a planted SAE feature whose encoder column is the basis vector e_d with offset b reads
h[:, d] + b on every token (checked against the hidden states computed directly), its parts sum
to it, and its contributions are the dimension card of d plus one offset row; in every format
(JumpReLU, ReLU with b_dec subtracted, TopK), with the activation that follows named in the
card's notes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from isoscope.analysis.dimension import DimensionSettings, dimension_card
from isoscope.analysis.sae.card import feature_card
from isoscope.analysis.sae.load import load_sae, on_model
from isoscope.engine.errors import InputError
from tests.extraction_checks import TEXTS, direct
from tests.sae_files import (
    DEAD_FEATURE,
    OUTLIER_DIM,
    OUTLIER_FEATURE,
    WIDTH,
    planted_sae,
    save_gemma_scope,
    save_outlier_bert,
    save_saelens,
    save_sparsify,
)

B_DEC_AT_D = 0.75  # b_dec[d] where the SAE subtracts b_dec from its input
# top_k past the corpus's token count: the card's top tokens list every token with its text and
# position, to check each value against the state computed directly.
CARD = {"ablation_texts": 0, "max_length": 64, "top_k": 100}


@pytest.fixture(scope="module")
def outlier_model(tmp_path_factory):
    from isoscope.engine.load.models import load_model

    folder = save_outlier_bert(tmp_path_factory.mktemp("outlier-bert"))
    return load_model(str(folder), device="cpu")


@pytest.fixture(scope="module")
def hidden(outlier_model):
    """State 1 of every token, by (text, position)."""
    vectors, tables = direct(outlier_model, TEXTS)
    starts = np.cumsum([0, *(len(t) for t in tables)])
    return {(i, p): vectors[1][starts[i] + p] for i, t in enumerate(tables) for p in range(len(t))}


def _assert_values(card, hidden, value_of) -> None:
    """Every token's value (the card's top tokens at the high end list them all) against
    ``value_of(h)`` of the state computed directly."""
    listed = [r for r in card.top_tokens if r["end"] == card.top_tokens[0]["end"]]
    assert len(listed) == card.n_tokens == len(hidden)
    for row in listed:
        expected = value_of(hidden[(row["text"], row["position"])])
        assert row["value"] == pytest.approx(expected, abs=1e-4), row


@pytest.fixture(scope="module")
def dim_card(outlier_model):
    return dimension_card(outlier_model, TEXTS, DimensionSettings(state=1, dim=OUTLIER_DIM, **CARD))


def _planted(offset: float, b_dec_at_d: float = 0.0):
    sae = planted_sae(np.ones(32))
    b_enc, b_dec = sae.b_enc.copy(), sae.b_dec.copy()
    b_enc[OUTLIER_FEATURE] = offset
    b_dec[OUTLIER_DIM] = b_dec_at_d
    return replace(sae, b_enc=b_enc, b_dec=b_dec)


# (format, saver, b_dec[d] subtracted from the input, words of the activation note)
FORMATS = {
    "gemma-scope jumprelu": (
        lambda sae, root: save_gemma_scope(sae, root / "resid_post" / "layer_0_sae"),
        0.0,
        "JumpReLU",
    ),
    "saelens relu, b_dec subtracted": (
        lambda sae, root: save_saelens(
            sae, root / "blocks.0.hook_resid_post", architecture="standard",
            apply_b_dec_to_input=True,
        ),
        B_DEC_AT_D,
        "is its ReLU",
    ),
    "sparsify topk": (lambda sae, root: save_sparsify(sae, root), 0.0, "TopK"),
}  # fmt: skip


@pytest.mark.parametrize("offset", [1.5, -2.0])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_basis_feature_is_the_dimension_plus_its_offset(
    outlier_model, hidden, dim_card, tmp_path, fmt, offset
):
    save, b_dec_at_d, activation = FORMATS[fmt]
    on = on_model(load_sae(str(save(_planted(offset, b_dec_at_d), tmp_path))), outlier_model)
    assert on.state == 1
    card = feature_card(outlier_model, TEXTS, on.sae, on.state, OUTLIER_FEATURE, **CARD)
    expected = offset - b_dec_at_d  # b_enc - W_enc[:, f] . b_dec, W_enc[:, f] = e_d
    assert card.offset == pytest.approx(expected)
    assert card.title == f"SAE feature {OUTLIER_FEATURE}"
    _assert_values(card, hidden, lambda h: h[OUTLIER_DIM] + expected)
    assert card.sum_check <= 1e-5 * max(card.value_scale, 1.0)
    # The parts: the dimension card's rows, unchanged, and one offset row.
    rows = [r for r in card.contributions if r["component"] != "offset"]
    (offset_row,) = [r for r in card.contributions if r["component"] == "offset"]
    assert len(rows) == len(dim_card.contributions)
    for got, want in zip(rows, dim_card.contributions, strict=True):
        assert {k: got[k] for k in ("layer", "component")} == {
            k: want[k] for k in ("layer", "component")
        }
        for stat in ("mean", "first_position", "other_positions", "at_top"):
            assert got[stat] == pytest.approx(want[stat], abs=1e-5), (got, stat)
    for stat in ("mean", "first_position", "other_positions"):
        assert offset_row[stat] == pytest.approx(expected)
    assert activation in card.notes[0] and "pre-activation" in card.notes[0]


@pytest.mark.parametrize(
    "feature,needle",
    [(DEAD_FEATURE, "encoder column is zero"), (WIDTH, "features 0 to"), (-1, "features 0 to")],
)
def test_a_feature_without_a_card_is_one_message(outlier_model, tmp_path, feature, needle):
    sae = load_sae(str(save_gemma_scope(_planted(0.0), tmp_path / "layer_0_sae")))
    with pytest.raises(InputError, match=needle):
        feature_card(outlier_model, TEXTS, sae, 1, feature, **CARD)


@pytest.mark.parametrize(
    "mode,needle", [("layer_norm", "u centred"), ("constant_norm_rescale", "norm sqrt(d)")]
)
def test_a_per_token_normalisation_is_said(outlier_model, hidden, tmp_path, mode, needle):
    folder = save_saelens(
        _planted(0.0), tmp_path / "blocks.0.hook_resid_post", normalize_activations=mode
    )
    sae = load_sae(str(folder))
    card = feature_card(outlier_model, TEXTS, sae, 1, OUTLIER_FEATURE, **CARD)
    assert any(needle in note for note in card.notes)
    assert card.sum_check <= 1e-5 * max(card.value_scale, 1.0)
    if mode == "layer_norm":  # u . (h - mean(h)), with u = e_d centred
        _assert_values(card, hidden, lambda h: h[OUTLIER_DIM] - h.mean())
    else:
        _assert_values(card, hidden, lambda h: h[OUTLIER_DIM])
