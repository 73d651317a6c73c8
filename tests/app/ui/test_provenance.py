"""AppTest: the Overview opened from a link on a copy of a checkpoint already analysed at another
path names the copy in its model card (the statistics are reused: one extraction for both)."""

from __future__ import annotations

import shutil
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[3] / "app.py")


def _card(model: str) -> dict[str, str]:
    at = AppTest.from_file(APP, default_timeout=600)
    at.query_params.update(page="overview", model=model, corpus="bundled")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    card = at.table[0].value
    return dict(zip(card["field"], card["value"].astype(str), strict=True))


def _own_bert(folder: Path) -> Path:
    """A tiny BERT with weights no other test uses (seed 31): the session's shared tiny models may
    already sit in the process-wide result store, which would leave this test no extraction to
    count."""
    from isoscope.engine.load.models import build_random_model, bundled_tokenizer

    tokenizer = bundled_tokenizer()
    model = build_random_model(
        "bert", {"layers": 2, "width": 32, "heads": 2, "seed": 31}, len(tokenizer), head="base"
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_the_overview_of_a_copy_names_the_copy(tmp_path, monkeypatch):
    import isoscope.engine.extraction as extraction

    tiny_bert_dir = _own_bert(tmp_path / "own")

    monkeypatch.setenv("ISOSCOPE_UMAP_WARMUP", "0")
    calls: list[str] = []
    real = extraction.extract
    monkeypatch.setattr(
        extraction,
        "extract",
        lambda loaded, *a, **k: calls.append(loaded.info.source) or real(loaded, *a, **k),
    )
    first, second = tmp_path / "first", tmp_path / "copy"
    shutil.copytree(tiny_bert_dir, first)
    shutil.copytree(tiny_bert_dir, second)

    card_a = _card(str(first))
    card_b = _card(str(second))
    assert calls == [str(first)]  # the copy reused the first path's extraction
    assert (card_a["name"], card_a["path"]) == (str(first), str(first.resolve()))
    assert (card_b["name"], card_b["path"]) == (str(second), str(second.resolve()))
    assert "statistics" not in card_a
    assert card_b["statistics"].startswith("reused from an identical checkpoint, fingerprint")
    assert str(first.resolve()) in card_b["statistics"]


def test_a_kept_quick_report_names_the_path_opened_now(tiny_bert_dir, tmp_path):
    """The Overview's findings come from a report kept per extraction (process-wide): built for
    the first path, it names the copy when the copy asks for it."""
    from isoscope.engine.inputs.corpus import corpus_from_text
    from isoscope.engine.load.models import load_model
    from isoscope.engine.store.cache import ResultCache
    from isoscope.engine.store.cached_extract import cached_extract
    from isoscope.ui.sharing.exports import quick_report

    cache = ResultCache(tmp_path / "cache")
    corpus = corpus_from_text("One text here.\nAnother text there.\nA third one.")
    reports = []
    for name in ("first", "copy"):
        shutil.copytree(tiny_bert_dir, tmp_path / name)
        loaded = load_model(str(tmp_path / name), device="cpu")
        reports.append(quick_report(loaded, cached_extract(loaded, corpus, cache=cache)))
    assert reports[0].sections[0].findings == reports[1].sections[0].findings  # one report
    assert [r.model["path"] for r in reports] == [
        str((tmp_path / "first").resolve()),
        str((tmp_path / "copy").resolve()),
    ]
    assert f"<td>{tmp_path / 'copy'}</td>" in reports[1].to_html()
