"""Every uploader, on every page, goes through the one upload check: on a shared server a file over
the visitor's upload limit is refused under its widget, whichever page and uploader it reaches
(the sidebar's corpus, the Compare page's corpus B and pairs CSV, the Similarity page's CSVs, a
saved analysis), and nothing is read from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from isoscope.ui.server import access

APP = str(Path(__file__).resolve().parents[3] / "app.py")
TINY = "random:bert:layers=2,width=32,heads=2,seed=5"
LIMIT_MB = 0.01  # about 10 kB
BIG_TEXTS = b"".join(b"text number %d of a corpus over the limit\n" % i for i in range(1000))
BIG_PAIRS = b"sentence1,sentence2,score\n" + b"A cat sat.,A cat sits.,5\n" * 1000


@pytest.fixture
def shared_env(monkeypatch, tmp_path):
    monkeypatch.setenv("ISOSCOPE_SHARED", "1")
    monkeypatch.setenv("ISOSCOPE_MAX_UPLOAD_MB", str(LIMIT_MB))
    monkeypatch.setenv("ISOSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ISOSCOPE_PASSPHRASE", raising=False)
    access.reset_policy()
    yield monkeypatch
    access.reset_policy()


def _app(page: str | None = None) -> AppTest:
    from isoscope.ui.frame.selection import Selection
    from isoscope.ui.frame.session import SELECTION_KEY

    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state[SELECTION_KEY] = Selection(model_source=TINY, device="cpu")
    at.run()
    if page:
        at.switch_page(page).run()
    assert not at.exception
    return at


def _refused(at: AppTest) -> bool:
    return any("upload limit" in e.value and "not read" in e.value for e in at.error)


def test_the_sidebar_corpus_upload_is_refused_over_the_limit(shared_env):
    at = _app()
    at.radio(key="sb_corpus_kind").set_value("upload a file").run()
    at.file_uploader(key="sb_corpus_file").set_value(("big.txt", BIG_TEXTS, "text/plain")).run()
    assert not at.exception and _refused(at)
    assert at.button(key="sb_run").disabled


def test_the_compare_pages_corpus_b_is_refused_over_the_limit(shared_env):
    at = _app("pages/compare.py")
    at.radio(key="cmp_mode").set_value("one model, two corpora").run()
    at.radio(key="cmp_corpus_b").set_value("upload a file").run()
    at.file_uploader(key="cmp_corpus_b_file").set_value(("b.txt", BIG_TEXTS, "text/plain")).run()
    assert not at.exception and _refused(at)
    assert any("Upload corpus B" in i.value for i in at.info)  # nothing was read


@pytest.mark.parametrize(
    ("page", "key"),
    [("pages/compare.py", "cmp_sts_file"), ("pages/similarity.py", "sim_sts_file")],
)
def test_pairs_csv_uploads_are_refused_over_the_limit(shared_env, page, key):
    at = _app(page)
    if key == "cmp_sts_file":
        at.radio(key="cmp_sts").set_value("upload a CSV").run()
    at.file_uploader(key=key).set_value(("pairs.csv", BIG_PAIRS, "text/csv")).run()
    assert not at.exception and _refused(at)


def test_a_saved_analysis_upload_is_refused_over_the_limit(shared_env):
    at = _app()
    at.file_uploader(key="saved_upload").set_value(
        ("run.isoscope", BIG_TEXTS, "application/zip")
    ).run()
    assert not at.exception and _refused(at)
