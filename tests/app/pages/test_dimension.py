"""AppTest of the dimension card page: MiniLM's dimension 223 at state 5 (its writers sum to its
value), a direction instead of a dimension, and a state change, with no exception."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[3] / "app.py")
TIMEOUT = 600  # the first run extracts the bundled MiniLM on the bundled corpus


@pytest.fixture(scope="module")
def app():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    at.switch_page("pages/dimension.py")
    at.session_state["dim_state"] = "5"
    at.session_state["dim_dim"] = 223
    at.session_state["dim_ablation_texts"] = 2
    at.session_state["dim_controls"] = 1
    at.run()
    assert not at.exception, at.exception
    return at


def test_card_of_dim_223_sums_and_shows_every_section(app):
    assert not app.error
    subheaders = [h.value for h in app.subheader]
    for title in ("Where it shows", "What writes it", "What reads it", "What it does"):
        assert title in subheaders
    check = next(m for m in app.metric if m.label == "Sum check")
    assert float(check.value) < 1e-3
    assert any("Ablation" in m.value for m in app.markdown)


@pytest.mark.parametrize("kind", ["mean direction", "principal component"])
def test_directions_open(app, kind):
    app.selectbox(key="dim_kind").set_value(kind).run()
    assert not app.exception, app.exception
    assert not app.error
    app.selectbox(key="dim_kind").set_value("dimension").run()


def test_state_change(app):
    app.session_state["dim_state"] = "emb"
    app.run()
    assert not app.exception, app.exception


def test_other_pages_link_to_the_card_and_the_link_opens_it(monkeypatch):
    from urllib.parse import parse_qsl, urlsplit

    monkeypatch.setenv("ISOSCOPE_UMAP_WARMUP", "0")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    at.switch_page("pages/outliers.py").run()
    assert not at.exception, at.exception
    links = [m.value for m in at.markdown if "Open the card of dim" in m.value]
    assert links, "the Outlier page names its dims with a link to the card"
    url = links[0][links[0].index("(dimension?") + 1 : links[0].index(")")]
    params = dict(parse_qsl(urlsplit(url).query))
    assert params["page"] == "dimension" and "dim_dim" in params and "state" in params
    opened = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for key, value in params.items():
        opened.query_params[key] = value
    opened.run()
    assert not opened.exception, opened.exception
    assert opened.session_state["dim_dim"] == int(params["dim_dim"])
    assert opened.session_state["dim_state"] == params["state"]
    assert any(h.value == "What writes it" for h in opened.subheader)
