"""Every result names what it was computed from: one checkpoint at two paths (a copied folder, a
renamed GGUF file) shares ONE extraction through the result cache, and each path's card, report
and JSON name that path, the copy's with one line saying the statistics were reused."""

from __future__ import annotations

import shutil

import pytest

from isoscope.engine.extraction import ExtractionSettings
from isoscope.engine.inputs.corpus import corpus_from_text
from isoscope.engine.load.models import load_model
from isoscope.engine.store.cache import ResultCache
from isoscope.engine.store.cached_extract import cached_extract
from isoscope.engine.store.provenance import REUSED_KEY
from isoscope.plots.overview import model_card_rows

TEXTS = "The bank raised its rates.\nWe sat on the river bank.\nA third text, with a comma."
SETTINGS = ExtractionSettings(max_length=16)


@pytest.fixture
def count_extractions(monkeypatch):
    """The number of real extractions (forward passes over the corpus) since the fixture began."""
    import isoscope.engine.extraction as extraction

    calls: list[str] = []
    real = extraction.extract

    def counted(loaded, *args, **kwargs):
        calls.append(loaded.info.source)
        return real(loaded, *args, **kwargs)

    monkeypatch.setattr(extraction, "extract", counted)
    return calls


def _card(result) -> dict[str, str]:
    return {row["field"]: row["value"] for row in model_card_rows(result.model)}


def _open_both(first: str, second: str, cache: ResultCache):
    corpus = corpus_from_text(TEXTS)
    loaded = [load_model(source, device="cpu") for source in (first, second)]
    results = [cached_extract(model, corpus, SETTINGS, cache=cache) for model in loaded]
    return loaded, results


def test_a_copied_folder_reuses_the_arrays_and_names_its_own_path(
    tiny_bert_dir, tmp_path, count_extractions
):
    first, second = tmp_path / "first", tmp_path / "copy"
    shutil.copytree(tiny_bert_dir, first)
    shutil.copytree(tiny_bert_dir, second)
    cache = ResultCache(tmp_path / "cache")
    (loaded_a, loaded_b), (result_a, result_b) = _open_both(str(first), str(second), cache)

    assert count_extractions == [str(first)]  # one extraction for both paths
    assert loaded_a.fingerprint == loaded_b.fingerprint
    assert (result_b.mean == result_a.mean).all()
    card_a, card_b = _card(result_a), _card(result_b)
    assert (card_a["name"], card_a["path"]) == (str(first), str(first.resolve()))
    assert (card_b["name"], card_b["path"]) == (str(second), str(second.resolve()))
    assert result_b.model["source"] == str(second)
    assert "statistics" not in card_a  # computed from the path it names
    line = card_b["statistics"]
    assert line.startswith("reused from an identical checkpoint, fingerprint ")
    assert loaded_a.fingerprint[:12] in line and str(first.resolve()) in line
    assert result_b.model[REUSED_KEY]["path"] == str(first.resolve())

    # the first path opened again: its own card, no reuse line, still no second extraction
    again = cached_extract(
        load_model(str(first), device="cpu"), corpus_from_text(TEXTS), SETTINGS, cache=cache
    )
    assert _card(again)["path"] == str(first.resolve()) and "statistics" not in _card(again)
    assert len(count_extractions) == 1


def test_a_renamed_gguf_file_names_the_new_name(tmp_path, count_extractions):
    from tests.gguf_files import build_case

    _model, path, _vocab = build_case("llama", tmp_path)
    renamed = path.with_name("renamed-copy.gguf")
    shutil.copyfile(path, renamed)
    cache = ResultCache(tmp_path / "cache")
    (loaded_a, loaded_b), (result_a, result_b) = _open_both(str(path), str(renamed), cache)

    assert loaded_a.weights_dir == loaded_b.weights_dir  # one converted copy of the same bytes
    assert count_extractions == [str(path)]
    card_a, card_b = _card(result_a), _card(result_b)
    assert card_a["name"].startswith(path.name) and card_a["path"] == str(path.resolve())
    assert card_b["name"].startswith("renamed-copy.gguf")
    assert card_b["path"] == str(renamed.resolve())
    assert str(path.resolve()) in card_b["statistics"]


def test_the_report_of_the_copy_names_the_copy(tiny_bert_dir, tmp_path, count_extractions):
    from isoscope.share.report import QUICK_SECTIONS, build_report

    first, second = tmp_path / "first", tmp_path / "copy"
    shutil.copytree(tiny_bert_dir, first)
    shutil.copytree(tiny_bert_dir, second)
    (_, loaded_b), (_, result_b) = _open_both(
        str(first), str(second), ResultCache(tmp_path / "cache")
    )
    report = build_report(loaded_b, result_b, sections=QUICK_SECTIONS)
    assert report.to_json()["model"]["path"] == str(second.resolve())
    html = report.to_html()
    assert f"<td>{second}</td>" in html  # the card's name
    assert "reused from an identical checkpoint" in html
    # a report kept for the first path, shown for the copy, names the copy
    assert report.named({"source": "x", "display_name": "x"}).model["display_name"] == "x"


def test_a_kept_comparison_names_the_paths_compared_now(tiny_bert_dir, tmp_path):
    from isoscope.analysis.compare.comparison import compare_with_cache

    first, second = tmp_path / "first", tmp_path / "copy"
    shutil.copytree(tiny_bert_dir, first)
    shutil.copytree(tiny_bert_dir, second)
    cache = ResultCache(tmp_path / "cache")
    _, (result_a, result_b) = _open_both(str(first), str(second), cache)
    kept = compare_with_cache(cache, result_a, result_a)
    reopened = compare_with_cache(cache, result_b, result_a)  # the same key: read from the cache
    assert (reopened.cka.matrix == kept.cka.matrix).all()
    assert reopened.a.model["path"] == str(second.resolve())
    assert reopened.b.model["path"] == str(first.resolve())
