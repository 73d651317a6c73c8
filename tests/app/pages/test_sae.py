"""AppTest of the SAE page (ui/views/sae.py): a tiny BERT with a planted outlier dimension and a
planted Gemma Scope-format SAE: every tab renders, the planted feature leads its dimension, a
feature's card shows its top tokens; a wrong-width SAE and a malformed source are one message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from isoscope.engine.extraction import ExtractionSettings
from isoscope.ui.frame.selection import Selection
from tests.app.charts import charts
from tests.app.conftest import shown
from tests.sae_files import (
    OUTLIER_DIM,
    OUTLIER_FEATURE,
    planted_sae,
    save_gemma_scope,
    save_outlier_bert,
)

APP = str(Path(__file__).resolve().parents[3] / "app.py")
TIMEOUT = 600
TEXTS = "Summer is warm. Winter is cold.\nThe cat sat on the mat.\nRivers run to the sea."


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("sae-page")
    model = save_outlier_bert(root / "bert")
    sae = save_gemma_scope(planted_sae(np.ones(32)), root / "resid_post" / "layer_0_width_24")
    narrow = save_gemma_scope(planted_sae(np.ones(16)), root / "narrow")
    return {"model": str(model), "sae": str(sae), "narrow": str(narrow)}


def _page(model: str, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["isoscope_selection"] = Selection(
        model_source=model,
        corpus_kind="paste",
        corpus_text=TEXTS,
        settings=ExtractionSettings(max_length=32, sample_size=2000),
    )
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    at.switch_page("pages/sae.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_without_an_sae_the_page_asks_for_one(files):
    at = _page(files["model"])
    assert any("Give an SAE" in i.value for i in at.info)
    assert not at.error


def test_every_tab_renders_and_the_planted_feature_leads(files):
    at = _page(files["model"], sae_source=files["sae"])
    assert not at.error, [e.value for e in at.error]
    assert at.metric[0].label == "FVU, ordinary tokens"
    assert {c.key for c in charts(at)} == {"sae_fidelity"}
    for tab, key in (("Dimensions", "sae_loadings"), ("Dense & dead", "sae_frequency")):
        at.session_state["sae_tab"] = tab
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert key in {c.key for c in charts(at)}
    at.session_state["sae_tab"] = "Dimensions"
    at.run()
    assert at.selectbox(key="sae_dim").value.startswith(f"dim {OUTLIER_DIM} ")
    at.session_state["sae_tab"] = "Feature card"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.number_input(key="sae_feature").value == OUTLIER_FEATURE
    assert any("Top-activating tokens" in m.value for m in at.markdown)


@pytest.mark.parametrize("source,needle", [("narrow", "width 16 but"), ("org", "no SAE at 'org'")])
def test_a_bad_sae_is_one_message(files, source, needle):
    at = _page(files["model"], sae_source=files.get(source, source))
    assert any(needle in shown(e.value) for e in at.error), [e.value for e in at.error]


@pytest.fixture
def shared(monkeypatch, tmp_path):
    from isoscope.ui.server import access

    monkeypatch.setenv("ISOSCOPE_SHARED", "1")
    monkeypatch.setenv("ISOSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ISOSCOPE_PASSPHRASE", raising=False)
    monkeypatch.delenv("ISOSCOPE_HUB_ALLOW", raising=False)
    access.reset_policy()
    yield
    access.reset_policy()


@pytest.mark.parametrize(
    "source,needle",
    [("folder", "Hub id only"), ("org/not-allowed/layer_3", "")],
)
def test_a_shared_server_opens_no_server_folder_and_no_unlisted_repo(shared, files, source, needle):
    """A visitor may not read the server's folders through the SAE box, nor download from a repo
    outside the operator's allow-list (the models' rule)."""
    from isoscope.engine.serve.access import SOURCE_REFUSED

    at = _page("random:bert:layers=2,width=32,heads=2,seed=5", sae_source=files["sae"]
               if source == "folder" else source)  # fmt: skip
    errors = [shown(e.value) for e in at.error]
    assert any((needle or SOURCE_REFUSED) in e for e in errors), errors


@pytest.mark.parametrize("ablation_texts", [0, 1])
def test_the_feature_tab_shows_the_features_dimension_card(files, ablation_texts):
    """Below the feature's facts, its card (the dimension card of its pre-activation) opens on
    demand with every section, a sum check that holds, and a caption saying that it decomposes
    the pre-activation, not the JumpReLU activation."""
    at = _page(files["model"], sae_source=files["sae"], sae_tab="Feature card")
    assert not at.error, [e.value for e in at.error]
    assert "Where it shows" not in [h.value for h in at.subheader]  # not computed until asked
    assert any("decomposes the feature's pre-activation" in shown(c.value) for c in at.caption)
    at.session_state["sae_card_ablation_texts"] = ablation_texts
    at.toggle(key="sae_card").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    subheaders = [h.value for h in at.subheader]
    for title in ("Where it shows", "What writes it", "What reads it", "What it does"):
        assert title in subheaders
    mean = next(m for m in at.metric if m.label.startswith("Mean of SAE feature"))
    assert mean.label == f"Mean of SAE feature {OUTLIER_FEATURE} at state 1"
    check = next(m for m in at.metric if m.label == "Sum check")
    assert float(check.value) < 1e-3
    assert {"sae_card_by_state", "sae_card_contributions"} <= {c.key for c in charts(at)}
    notes = [shown(c.value) for c in at.caption if "pre-activation" in shown(c.value)]
    assert any("JumpReLU" in n for n in notes), notes
    assert any("Ablation" in m.value for m in at.markdown) == bool(ablation_texts)
