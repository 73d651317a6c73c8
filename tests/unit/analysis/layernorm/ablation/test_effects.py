"""The ablation's records on planted numbers: the JSON body (changes against the original), the
random controls' summary and the long table."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.layernorm.ablation.effects import AblationReport, Effect


def _effect(cos: float, aniso: float, sts: float | None = None, mlm: float | None = None):
    return Effect(
        embedding_cosine=np.array([1.0, cos]),
        token_cosine=np.array([1.0, cos - 0.1]),
        anisotropy=np.array([0.2, aniso]),
        sts_spearman=None if sts is None else np.array([50.0, sts]),
        mlm_loss=mlm,
    )


def _report(with_sts: bool = True, with_mlm: bool = True) -> AblationReport:
    def eff(cos, aniso, sts, mlm):
        return _effect(cos, aniso, sts if with_sts else None, mlm if with_mlm else None)

    return AblationReport(
        dims=[3, 7],
        norms=["L1.out_ln"],
        state_names=["emb", "1"],
        effect=eff(0.5, 0.9, 30.0, 6.0),
        controls=[([1, 2], eff(0.98, 0.3, 49.0, 2.1)), ([4, 5], eff(0.96, 0.5, 47.0, 2.3))],
        anisotropy_original=np.array([0.2, 0.4]),
        sts_spearman_original=np.array([50.0, 48.0]) if with_sts else None,
        mlm_loss_original=2.0 if with_mlm else None,
        num_texts=4,
        num_masked=9,
        seed=0,
        seconds=0.5,
    )


def test_effect_to_dict_is_plain_lists():
    data = _effect(0.5, 0.9).to_dict()
    assert data == {
        "embedding_cosine": [1.0, 0.5],
        "token_cosine": [1.0, 0.4],
        "anisotropy": [0.2, 0.9],
        "sts_spearman": None,
        "mlm_loss": None,
    }


def test_the_json_body_gives_changes_against_the_original():
    body = _report().to_json()
    effect = body["effect"]
    assert effect["anisotropy_change"] == pytest.approx([0.0, 0.5])
    assert effect["sts_spearman_change"] == pytest.approx([0.0, -18.0])
    assert effect["mlm_loss"] == 6.0 and effect["mlm_loss_original"] == 2.0
    assert [c["dims"] for c in body["random_controls"]] == [[1, 2], [4, 5]]
    assert body["random_controls"][1]["effect"]["anisotropy_change"] == pytest.approx([0.0, 0.1])
    assert (body["dims"], body["num_masked_tokens"], body["notices"]) == ([3, 7], 9, [])
    no_sts = _report(with_sts=False).to_json()["effect"]
    assert "sts_spearman_change" not in no_sts and no_sts["sts_spearman"] is None


def test_control_summary_is_mean_std_min_max_over_the_controls():
    report = _report()
    np.testing.assert_allclose(report.control_values("embedding_cosine"), [[1, 0.98], [1, 0.96]])
    np.testing.assert_allclose(report.control_values("mlm_loss"), [2.1, 2.3])
    summary = report.control_summary()
    assert summary["embedding_cosine"]["mean"] == pytest.approx([1.0, 0.97])
    assert summary["embedding_cosine"]["std"] == pytest.approx([0.0, 0.01])
    assert summary["anisotropy"]["min"] == pytest.approx([0.2, 0.3])
    assert summary["anisotropy"]["max"] == pytest.approx([0.2, 0.5])
    assert summary["mlm_loss"]["mean"] == pytest.approx(2.2)
    bare = _report(with_sts=False, with_mlm=False).control_summary()
    assert bare["sts_spearman"] is None and bare["mlm_loss"] is None
    no_controls = AblationReport(**{**_report().__dict__, "controls": []})
    assert all(v is None for v in no_controls.control_summary().values())


def test_frame_has_a_row_per_condition_state_and_metric():
    frame = _report().frame()
    assert set(frame["condition"]) == {"ablation", "control 1", "control 2"}
    # per condition: 4 per-state metrics x 2 states + the MLM loss
    assert len(frame) == 3 * (4 * 2 + 1)
    row = frame[(frame.condition == "ablation") & (frame.metric == "embedding_cosine")]
    assert row["value"].tolist() == [1.0, 0.5] and row["state"].tolist() == ["emb", "1"]
    assert set(frame[frame.condition == "control 2"]["dims"]) == {"4 5"}
    assert frame[frame.metric == "mlm_loss"]["value"].tolist() == [6.0, 2.1, 2.3]
    assert len(_report(with_sts=False, with_mlm=False).frame()) == 3 * 3 * 2
