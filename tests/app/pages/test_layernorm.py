"""AppTest of the LayerNorm page: default run, widget changes, a small ablation, bad inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.charts import charts

APP = str(Path(__file__).resolve().parents[3] / "app.py")
TIMEOUT = 600  # the first run extracts the bundled MiniLM on the bundled corpus


@pytest.fixture(scope="module")
def app():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    at.switch_page("pages/layernorm.py").run()
    assert not at.exception, at.exception
    return at


def outlier_line(at) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**Outlier dims:**"))


def chart_keys(at: AppTest) -> set[str]:
    return {c.key for c in charts(at)}


def test_default_run_shows_heatmaps_and_minilm_outliers(app):
    assert not app.exception
    assert chart_keys(app) == {"ln_heat_gamma"}  # lazy tabs: only the open one is drawn
    app.session_state["ln_tab"] = "counts per LayerNorm"
    app.run()
    assert chart_keys(app) == {"ln_heat_gamma", "ln_counts"}  # opened tabs stay drawn
    app.session_state["ln_tab"] = "β (beta)"
    app.run()
    assert chart_keys(app) == {"ln_heat_gamma", "ln_heat_beta", "ln_counts"}
    app.session_state["ln_tab"] = "overlap with hidden states"
    app.run()
    assert chart_keys(app) == {"ln_heat_gamma", "ln_heat_beta", "ln_counts", "ln_overlap"}
    assert any("Overlap with hidden-state" in h.value for h in app.subheader)
    line = outlier_line(app)
    assert "223" in line and "127" in line
    assert not app.error


def test_threshold_change_and_random_init_toggle(app):
    app.slider(key="ln_share").set_value(0.65).run()  # 4 of the 6 output LNs
    assert not app.exception
    strict = outlier_line(app)
    assert (
        "223" in strict and "127" not in strict
    )  # 223 (gamma in 4 LNs) survives, 127 (3) does not
    app.radio(key="ln_weights").set_value("random-init copy").run()
    assert not app.exception
    assert outlier_line(app).endswith("none") and app.metric[0].value == "0"
    assert any("Random-init weights" in i.value for i in app.info)
    app.radio(key="ln_weights").set_value("trained").run()
    app.slider(key="ln_share").set_value(0.5).run()
    assert not app.exception


def test_small_ablation_runs(app):
    app.radio(key="ln_dims_mode").set_value("typed")
    app.text_input(key="ln_dims_text").set_value("127, 223, 319")
    app.slider(key="ln_texts").set_value(4)
    app.slider(key="ln_controls").set_value(2)
    app.button(key="ln_ablation_run").click().run()
    assert not app.exception, app.exception
    assert not app.error
    assert app.selectbox(key="ln_metric").value == "embedding_cosine"
    app.selectbox(key="ln_metric").set_value("anisotropy_change").run()
    assert not app.exception


@pytest.mark.parametrize(
    ("typed", "message"), [("abc", "not an integer"), ("127, 999", "out of range")]
)
def test_bad_typed_dims_show_an_error(app, typed, message):
    app.radio(key="ln_dims_mode").set_value("typed")
    app.text_input(key="ln_dims_text").set_value(typed)
    app.button(key="ln_ablation_run").click().run()
    assert not app.exception
    assert any(message in e.value for e in app.error)


def test_pre_ln_model_from_the_sidebar():
    """A random GPT-2 (pre-LN): pre-attention / pre-MLP norms, no outliers, typed ablation works."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    at.switch_page("pages/layernorm.py").run()
    at.selectbox(key="sb_model_preset").set_value("random GPT-2 (4 layers, 256)")
    at.slider(key="sb_max_length").set_value(16)
    next(b for b in at.button if b.label == "Run analysis").click().run()
    assert not at.exception, at.exception
    assert at.multiselect(key="ln_detect_roles").value == ["pre_attn", "pre_mlp"]
    assert outlier_line(at).endswith("none")
    at.radio(key="ln_dims_mode").set_value("typed")
    at.text_input(key="ln_dims_text").set_value("3, 200")
    at.slider(key="ln_texts").set_value(4)
    at.slider(key="ln_controls").set_value(1)
    at.button(key="ln_ablation_run").click().run()
    assert not at.exception and not at.error
    assert any("L1.pre_attn_ln" in c.value for c in at.caption)


def test_llama_rmsnorm_from_the_custom_model_field(tiny_llama_dir):
    """A Llama-family checkpoint typed into Custom model: RMSNorm (gamma only) under the pre-norm
    names, no beta heatmap, and a typed ablation runs (architecture map, issue 8)."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    at.switch_page("pages/layernorm.py").run()
    at.text_input(key="sb_model_custom").input(str(tiny_llama_dir)).run()
    at.slider(key="sb_max_length").set_value(16)
    next(b for b in at.button if b.label == "Run analysis").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.multiselect(key="ln_detect_roles").value == ["pre_attn", "pre_mlp"]
    assert outlier_line(at).endswith("none")  # RMSNorm init: gamma 1 everywhere
    at.session_state["ln_tab"] = "β (beta)"
    at.run()
    assert any("no β" in i.value for i in at.info)
    at.radio(key="ln_dims_mode").set_value("typed")
    at.text_input(key="ln_dims_text").set_value("3, 20")
    at.slider(key="ln_texts").set_value(4)
    at.slider(key="ln_controls").set_value(1)
    at.button(key="ln_ablation_run").click().run()
    assert not at.exception and not at.error
    assert any("L1.pre_attn_ln" in c.value and "final_ln" not in c.value for c in at.caption)
