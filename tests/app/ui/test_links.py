"""AppTest of shareable links: the URL holds model, corpus, page, hidden state and the page's main
controls; opening that URL in a new session reopens the same view; an invalid value opens the
defaults with one line saying so."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[3] / "app.py")


@pytest.fixture(autouse=True)
def _no_umap_warmup(monkeypatch):
    monkeypatch.setenv("ISOSCOPE_UMAP_WARMUP", "0")


def open_link(**params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=600)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _params(at: AppTest) -> dict[str, str]:
    return {k: (v[-1] if isinstance(v, list) else v) for k, v in at.query_params.items()}


def test_a_view_round_trips_through_its_link():
    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    at.switch_page("pages/projections.py").run()
    at.selectbox(key="proj_post").set_value("standardize").run()
    at.selectbox(key="proj_state").set_value(2).run()
    assert not at.exception
    link = _params(at)
    assert link["page"] == "projections" and link["model"] == "default"
    assert link["corpus"] == "bundled"
    assert link["proj_post"] == "standardize" and link["state"] == "2"

    reopened = open_link(**link)
    assert [t.value for t in reopened.title] == ["Clipping & projections"]
    assert reopened.selectbox(key="proj_post").value == "standardize"
    assert reopened.selectbox(key="proj_state").value == 2
    assert not reopened.warning
    assert _params(reopened) == link


def test_a_link_with_pasted_text_and_the_tour_step():
    at = open_link(
        page="tour", model="default", corpus="paste", texts="A cat sat.\nA dog ran.", tour_step="5"
    )
    assert [t.value for t in at.title] == ["Guided tour"]
    assert at.radio(key="tour_step").value == "5"
    assert "2 texts" in " ".join(c.value for c in at.sidebar.caption) or any(
        "pasted text" in c.value for c in at.sidebar.caption
    )


def test_invalid_values_open_the_defaults_with_one_notice():
    at = open_link(page="projections", model="no/such/model/here", proj_method="bogus", state="99")
    assert [t.value for t in at.title] == ["Clipping & projections"]
    notices = [w.value for w in at.warning if "invalid or unknown" in w.value]
    assert len(notices) >= 1
    assert "model 'no/such/model/here'" in notices[0] and "proj_method 'bogus'" in notices[0]
    assert at.selectbox(key="proj_method").value == "pca"
    assert _params(at)["model"] == "default"


def test_a_hub_model_in_the_local_cache_opens_from_a_link(tiny_bert_dir, tmp_path, monkeypatch):
    """An "org/name" id that the server's Hugging Face cache holds is a valid link model (and
    Model B); one it does not hold opens the default with the notice. Nothing is downloaded."""
    import shutil

    import huggingface_hub.constants

    repo = tmp_path / "hub" / "models--someorg--tiny-bert"
    shutil.copytree(tiny_bert_dir, repo / "snapshots" / ("0" * 40))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))

    at = open_link(page="outliers", model="someorg/tiny-bert", corpus="bundled")
    assert not [w.value for w in at.warning if "invalid or unknown" in w.value]
    assert _params(at)["model"] == "someorg/tiny-bert"
    assert at.sidebar.text_input(key="sb_model_custom").value == "someorg/tiny-bert"
    cmp = open_link(page="compare", model="default", model_b="someorg/tiny-bert")
    assert cmp.text_input(key="cmp_model_b_custom").value == "someorg/tiny-bert"

    missing = open_link(page="outliers", model="someorg/not-downloaded")
    notices = [w.value for w in missing.warning if "invalid or unknown" in w.value]
    assert notices and "someorg/not-downloaded" in notices[0]
    assert _params(missing)["model"] == "default"


def test_an_unknown_page_opens_the_overview():
    at = open_link(page="nowhere")
    assert [t.value for t in at.title] == ["Overview"]
    assert any("page 'nowhere'" in w.value for w in at.warning)


def test_a_link_to_a_former_page_path_opens_the_page_under_its_path_now(tiny_llama_dir):
    """A link shared while the Massive activations page was at ``decoder`` opens it, with the
    link's controls, and the URL then names ``massive`` (ui/sharing/links.py, PAGE_ALIASES)."""
    from isoscope.ui.sharing.links import PAGE_ALIASES

    assert PAGE_ALIASES == {"decoder": "massive"}
    at = open_link(
        page="decoder",
        model=str(tiny_llama_dir),
        corpus="paste",
        texts="Summer is warm. Winter is cold.\nThe cat sat on the mat.",
        massive_max_length="16",
    )
    assert [t.value for t in at.title] == ["Massive activations & sinks"]
    assert at.select_slider(key="massive_max_length").value == 16
    assert not [w for w in at.warning if "link" in w.value]
    link = _params(at)
    assert link["page"] == "massive" and link["massive_max_length"] == "16"


def _list_former_pages(folder: str) -> None:
    from pathlib import Path

    import streamlit as st

    from isoscope.ui.sharing.links import former_pages

    for page in former_pages(Path(folder)):
        st.text(f"{page.url_path} {page.visibility}")


def test_a_former_page_path_is_a_hidden_page_running_the_page_now():
    """st.Page is only whole inside a script run: listed by a one-function app."""
    at = AppTest.from_function(_list_former_pages, args=(str(Path(APP).parent / "pages"),))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.text] == ["decoder hidden"]


@pytest.mark.parametrize(
    ("page", "widget"), [("outliers", "out_state"), ("anisotropy", "aniso_layer")]
)
def test_the_hidden_state_of_a_slider_page_round_trips(page, widget):
    at = open_link(page=page, model="default", corpus="bundled", state="emb")
    assert at.select_slider(key=widget).value == "emb"
    assert not at.warning
    at.select_slider(key=widget).set_value("5").run()
    assert not at.exception
    assert _params(at)["state"] == "5"


def test_similarity_controls_round_trip():
    link = {
        "page": "similarity",
        "model": "default",
        "corpus": "bundled",
        "sim_sts_clip_mode": "corpus",
        "sim_sts_post": "whiten",
        "sim_wic_clip_mode": "auto",
        "sim_wic_post": "none",
    }
    at = open_link(**link)
    assert [t.value for t in at.title] == ["Sentence similarity"]
    assert at.selectbox(key="sim_sts_clip_mode").value == "corpus"
    assert at.selectbox(key="sim_sts_post").value == "whiten"
    assert at.selectbox(key="sim_wic_clip_mode").value == "auto"
    assert not [w for w in at.warning if "link" in w.value]
    assert _params(at) == link


def test_a_lazy_tab_in_a_link_opens_that_tab_and_an_unknown_one_the_first():
    at = open_link(page="layernorm", model="default", corpus="bundled", ln_tab="β (beta)")
    assert at.session_state["ln_tab"] == "β (beta)"
    assert _params(at)["ln_tab"] == "β (beta)"
    assert not [w for w in at.warning if "link" in w.value]

    bad = open_link(page="layernorm", model="default", corpus="bundled", ln_tab="no such tab")
    assert any("unknown tab 'no such tab'" in w.value for w in bad.warning)
    assert not bad.exception
    assert _params(bad).get("ln_tab") in (None, "γ (gamma)")


def test_the_compare_pages_model_b_travels_in_the_link():
    at = open_link(page="compare", model="default", corpus="bundled", model_b="random:bert")
    assert [t.value for t in at.title] == ["Compare"]
    assert at.selectbox(key="cmp_model_b").value == "random BERT (4 layers, 256)"
    assert _params(at)["model_b"] == "random:bert"

    typed = open_link(page="compare", model="default", model_b="random:gpt2:layers=2")
    assert typed.text_input(key="cmp_model_b_custom").value == "random:gpt2:layers=2"
    assert _params(typed)["model_b"] == "random:gpt2:layers=2"

    bad = open_link(page="compare", model="default", model_b="no/such/checkpoint")
    assert any("model B 'no/such/checkpoint'" in w.value for w in bad.warning)
    assert _params(bad)["model_b"].startswith("random-like:")


def test_a_gguf_path_is_a_model_a_link_may_name(tmp_path):
    """As in the sidebar and the CLI: an existing .gguf file is a valid model; a missing one is not."""
    from isoscope.ui.sharing.links import known_model

    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    assert known_model(str(gguf))
    assert not known_model(str(tmp_path / "missing.gguf"))


def test_the_quantization_pages_controls_travel_in_the_link():
    link = {
        "page": "quant",
        "model": "random:gpt2:layers=2,width=32,heads=2",
        "corpus": "bundled",
        "quant_max_length": "32",
        "quant_keep": "3",
        "quant_alpha": "0.8",
        "quant_alpha_auto": "False",
        "quant_ignore_share": "0.3",
    }
    at = open_link(**link)
    assert [t.value for t in at.title] == ["Quantization readiness"]
    assert at.number_input(key="quant_keep").value == 3
    assert at.slider(key="quant_alpha").value == pytest.approx(0.8)
    assert at.toggle(key="quant_alpha_auto").value is False  # the link's α, not the sweep's
    assert at.select_slider(key="quant_max_length").value == 32
    assert not [w for w in at.warning if "link" in w.value]
    params = _params(at)
    assert {k: params[k] for k in link} == link
    # the recipe's ignore share (its slider appears once the analysis ran) travels too
    at.button(key="quant_run").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.slider(key="quant_ignore_share").value == pytest.approx(0.3)
    assert _params(at)["quant_ignore_share"] == "0.3"
    bad = open_link(page="quant", model="random:bert", quant_keep="9999")
    assert any("quant_keep" in w.value for w in bad.warning)
    bad_share = open_link(page="quant", model="random:bert", quant_ignore_share="1.5")
    assert any("quant_ignore_share" in w.value for w in bad_share.warning)
    encoder = open_link(page="quant", model="random:bert", quant_pairs="bundled sample pairs")
    assert encoder.selectbox(key="quant_pairs").value == "bundled sample pairs"
    assert _params(encoder)["quant_pairs"] == "bundled sample pairs"


def test_the_outlier_thresholds_travel_in_the_link():
    """The four criteria's sliders are built from their backend declarations
    (isoscope.analysis.outliers), which is also what a link's values are checked against."""
    from isoscope.analysis import outliers

    link = {
        "page": "outliers",
        "model": "random:bert:layers=2,width=32,heads=2,seed=0",
        "corpus": "paste",
        "texts": "A cat sat on the mat.\nThe river bank was muddy.\nRates rose again.",
        "out_thr_extreme": "0.7",
        "out_thr_z": "4.5",
        "out_thr_q": "0.95",
        "out_thr_var": "2.5",
    }
    at = open_link(**link)
    assert [t.value for t in at.title] == ["Outlier dimensions"]
    for key, declared, value in (
        ("out_thr_extreme", outliers.EXTREME_SHARE, 0.7),
        ("out_thr_z", outliers.ZSCORE_K, 4.5),
        ("out_thr_q", outliers.QUANTILE, 0.95),
        ("out_thr_var", outliers.VARIANCE_FACTOR, 2.5),
    ):
        slider = at.slider(key=key)
        assert (slider.min, slider.max, slider.step) == (declared.low, declared.high, declared.step)
        assert slider.value == pytest.approx(value)
    assert not [w for w in at.warning if "link" in w.value]
    params = _params(at)
    assert {k: params[k] for k in link if k.startswith("out_thr")} == {
        k: v for k, v in link.items() if k.startswith("out_thr")
    }
    bad = open_link(**(link | {"out_thr_z": "50"}))
    assert any("out_thr_z" in w.value for w in bad.warning)
    assert bad.slider(key="out_thr_z").value == outliers.ZSCORE_K.default


TINY_VIT = "random:vit:layers=2,width=32,heads=2"


def test_an_image_demo_link_opens_the_overview_and_round_trips():
    at = open_link(page="overview", model=TINY_VIT, corpus="images")
    assert not at.error and not at.warning, [e.value for e in at.error]
    link = _params(at)
    assert link["corpus"] == "images" and "folder" not in link and link["model"] == TINY_VIT


def test_an_image_folder_travels_where_the_server_reads_folders(tmp_path):
    from tests.media_models import image_folder

    folder = str(image_folder(tmp_path / "imgs", 2))
    at = open_link(page="overview", model=TINY_VIT, corpus="images", folder=folder)
    assert not at.warning, [w.value for w in at.warning]
    assert _params(at)["folder"] == folder
    missing = open_link(page="overview", model=TINY_VIT, corpus="audio", folder="/no/such/dir")
    assert any("folder '/no/such/dir'" in w.value for w in missing.warning)


def test_a_link_to_an_uncached_hub_id_downloads_it(standin_hub, tiny_bert_dir, monkeypatch):
    """Online, a link may name a Hub id the server has not downloaded: the page fetches it (as a
    typed id), and its card names the commit; on a shared server the allow-list decides first."""
    sha = standin_hub.add_folder("org/tiny-bert", tiny_bert_dir)
    at = open_link(page="overview", model="org/tiny-bert", corpus="bundled")
    assert not [w.value for w in at.warning if "invalid or unknown" in w.value]
    assert _params(at)["model"] == "org/tiny-bert"
    assert len(standin_hub.downloads("model.safetensors")) == 1
    cells = [str(v) for table in at.table for v in table.value.to_numpy().ravel()]
    assert sha in cells

    from isoscope.ui.server import access

    monkeypatch.setenv("ISOSCOPE_SHARED", "1")
    monkeypatch.setenv("ISOSCOPE_HUB_ALLOW", "google/*")
    monkeypatch.delenv("ISOSCOPE_PASSPHRASE", raising=False)
    standin_hub.add_folder("org/other", tiny_bert_dir)
    access.reset_policy()
    try:
        refused = open_link(page="overview", model="org/other")
    finally:
        monkeypatch.undo()
        access.reset_policy()
    notices = [w.value for w in refused.warning if "invalid or unknown" in w.value]
    assert notices and "org/other" in notices[0] and _params(refused)["model"] == "default"
    assert [r for r in standin_hub.requests if "org/other" in r[1]] == []  # not one request


def test_app_run_without_a_server_reads_no_link():
    """app.py run as a plain script (bare mode: what a spawned worker process does when the parent
    ran the app) has no URL: applying a link does nothing and the script does not fail."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", f"import runpy; runpy.run_path({APP!r})"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=str(Path(APP).parent),
    )
    assert done.returncode == 0, done.stderr[-2000:]
