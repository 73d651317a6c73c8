"""AppTest of the Clipping & projections page's "all tokens" points (issue 35): nothing heavy runs
until the button, then every token of the state is projected and published to the atlas frame."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from isoscope.ui.widgets.atlas import point_store
from isoscope.ui.widgets.ranges import PROJ_ALL_TOKENS as ALL_TOKENS

APP = str(Path(__file__).resolve().parents[3] / "app.py")

pytestmark = pytest.mark.app


@pytest.fixture(autouse=True)
def _no_umap_warmup(monkeypatch):
    monkeypatch.setenv("ISOSCOPE_UMAP_WARMUP", "0")


def test_all_tokens_waits_for_the_button_then_publishes_every_token():
    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    at.switch_page("pages/projections.py").run()
    at.radio(key="proj_data").set_value(ALL_TOKENS).run()
    assert not at.exception, [e.value for e in at.exception]
    captions = " ".join(c.value for c in at.caption)
    assert "Every one of the" in captions and "second pass" in captions
    assert "proj_atlas_published" not in at.session_state
    at.button(key="proj_every_token_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.exception]
    digest, url = at.session_state["proj_atlas_published"]
    assert url.startswith("data/") and url.endswith(".bin")
    payload = (point_store().folder / url.removeprefix("data/")).read_bytes()
    from isoscope.plots.atlas import decode_points

    header, arrays = decode_points(payload)
    assert header["points"] == len(arrays["token"]) > 5000  # the bundled corpus's every token
    assert header["methods"] == ["PCA", "PCA"]
    from isoscope.engine.store.cache import ResultCache

    usage = ResultCache().usage()  # the spilled state is in the cache, under its limit
    assert usage.spill_count >= 1 and usage.spill_bytes >= header["points"] * 384 * 4
    at.button(key="proj_every_token_close").click().run()
    assert not at.exception
    assert at.button(key="proj_every_token_go")  # back to the button: nothing runs by itself
