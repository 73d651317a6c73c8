"""AppTest of the Overview page: default run, a new corpus through the sidebar form, bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from isoscope.ui.frame.sidebar import MODEL_PRESETS

APP = str(Path(__file__).resolve().parents[3] / "app.py")
TIMEOUT = 240  # the first run extracts the bundled MiniLM on the bundled corpus (~10-30 s)


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception
    return at


def _submit(at: AppTest) -> None:
    next(b for b in at.button if b.label == "Run analysis").click().run()


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_default_run_shows_model_card_and_metrics():
    at = _app()
    assert [t.value for t in at.title] == ["Overview"]
    metrics = _metrics(at)
    assert int(metrics["Texts"].replace(",", "")) >= 200
    assert int(metrics["Tokens analysed"].replace(",", "")) > 1000
    card = at.table[0].value
    assert "BertModel" in " ".join(card["value"].astype(str))
    rows = at.dataframe[0].value
    assert rows["hidden state"].tolist() == ["emb", "1", "2", "3", "4", "5", "6"]
    assert (
        "223" in rows.set_index("hidden state").loc["3", "outlier dims (z-score or extreme-index)"]
    )
    assert not at.error
    # The anisotropy line shows every hidden state, "emb" included (a numeric-looking axis drops it).
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][0]["x"] == ["emb", "1", "2", "3", "4", "5", "6"]
    assert spec["layout"]["xaxis"]["type"] == "category"


def test_pasted_text_through_the_sidebar_form():
    at = _app()
    at.radio(key="sb_corpus_kind").set_value("paste text").run()
    at.text_area(key="sb_corpus_text").input(
        "The cat sat on the mat.\nA dog barked.\nRates rose again."
    ).run()
    assert any("will analyse" in i.value and "pasted text" in i.value for i in at.sidebar.info)
    _submit(at)
    assert not at.exception and not at.error
    assert _metrics(at)["Texts"] == "3"
    assert any("pasted text" in c.value for c in at.sidebar.caption)


def test_empty_pasted_text_shows_an_error():
    at = _app()
    at.radio(key="sb_corpus_kind").set_value("paste text").run()
    at.text_area(key="sb_corpus_text").input("   ")
    _submit(at)
    assert not at.exception
    assert any("pasted text is empty" in e.value for e in at.error)


def test_missing_model_folder_shows_an_error():
    at = _app()
    custom = next(label for label, source in MODEL_PRESETS.items() if source == "custom")
    at.selectbox(key="sb_model_preset").set_value(custom)
    at.text_input(key="sb_model_custom").input("/no/such/isoscope/checkpoint")
    _submit(at)
    assert not at.exception
    assert any("does not exist" in e.value for e in at.error)


def test_a_slow_model_gets_a_first_look_and_one_click_runs_the_whole_corpus(monkeypatch):
    from isoscope.engine.budget import page_budget, throughput

    # This device made slow: the stored measurement says 30 short texts take minutes.
    monkeypatch.setattr(throughput, "seconds_per_token_parameter", lambda *_: 1e-7)
    monkeypatch.setenv(page_budget.BUDGET_ENV, "60")
    texts = "\n".join(f"First look sentence {i} is about topic {i * 7}." for i in range(30))
    at = _app()
    at.radio(key="sb_corpus_kind").set_value("paste text").run()
    at.text_area(key="sb_corpus_text").input(texts).run()
    _submit(at)
    assert not at.exception and not at.error
    notes = [i.value for i in at.info if "first look" in i.value]
    assert notes and "first look: 8 of 30 texts" in notes[0]
    assert _metrics(at)["Texts"] == "8"
    assert any("first look, 8 of 30 texts" in c.value for c in at.caption)  # under the figures

    next(b for b in at.button if b.label == "Run the whole corpus").click().run()
    assert not at.exception and not at.error
    assert _metrics(at)["Texts"] == "30"
    assert not any("first look" in i.value for i in at.info)
    assert not any("first look" in c.value for c in at.caption)


def test_the_extraction_bar_starts_with_the_estimate_from_the_measured_speed(monkeypatch):
    import isoscope.ui.work.extraction
    import isoscope.ui.work.queue
    from isoscope.engine.budget import throughput

    labels: list[str] = []
    run = isoscope.ui.work.queue.shared_run

    estimates: list[float | None] = []

    def spy(key, label, compute, **kwargs):
        labels.append(label)
        estimates.append(kwargs.get("estimate_s"))
        return run(key, label, compute, **kwargs)

    monkeypatch.setattr(isoscope.ui.work.extraction, "shared_run", spy)
    monkeypatch.setattr(throughput, "seconds_per_token_parameter", lambda *_: 1e-9)
    at = _app()
    at.radio(key="sb_corpus_kind").set_value("paste text").run()
    at.text_area(key="sb_corpus_text").input("An estimate first.\nThen the bar's ETA.").run()
    _submit(at)
    assert not at.exception and not at.error
    extracting = [label for label in labels if label.startswith("Extracting hidden states")]
    assert any("s estimated on this device" in label for label in extracting)
    assert any(e is not None and e > 0 for e in estimates)  # the bar's ETA before a batch


def test_a_devices_first_run_measures_its_first_batch_and_shows_a_first_look(monkeypatch, capsys):
    from isoscope.engine.budget import page_budget, throughput
    from isoscope.engine.serve import firstlook
    from isoscope.ui.work.extraction import EXTRACTION_LOG

    # No speed recorded on this device; its first batch measures 1 s per token (a slow device).
    monkeypatch.setattr(throughput, "seconds_per_token_parameter", lambda *_: None)
    monkeypatch.setenv(page_budget.BUDGET_ENV, "60")
    real = firstlook.extract_partial
    parts: list[int] = []

    def slow(loaded, texts, settings, **kwargs):
        part = real(loaded, texts, settings, **kwargs)
        part.seconds = float(sum(len(t) for t in part.tokens))
        parts.append(len(texts))
        return part

    monkeypatch.setattr(firstlook, "extract_partial", slow)
    texts = "\n".join(f"A first run sentence {i} about {i * 3}." for i in range(80))
    at = _app()
    parts.clear()  # the default page's run
    capsys.readouterr()
    at.radio(key="sb_corpus_kind").set_value("paste text").run()
    at.text_area(key="sb_corpus_text").input(texts).run()
    _submit(at)
    assert not at.exception and not at.error
    notes = [i.value for i in at.info if "first look" in i.value]
    assert notes and "first look: 8 of 80 texts" in notes[0]  # the first batch of 8 is all
    assert "measured on its first batch" in notes[0]
    assert _metrics(at)["Texts"] == "8" and parts == [8]  # extracted once, read from the cache
    # the server log names that one extraction (benchmarks/classroom.py counts these lines)
    assert capsys.readouterr().err.count(EXTRACTION_LOG) == 1


def test_the_overview_keeps_its_statistics_time_for_the_next_first_look(monkeypatch):
    import itertools
    import re
    from types import SimpleNamespace

    import isoscope.ui.views.overview
    from isoscope.engine.budget import throughput
    from isoscope.engine.store.cache import ResultCache

    ticks = itertools.count(0.0, 12.5)  # the page's statistics "take" 12.5 s
    monkeypatch.setattr(
        isoscope.ui.views.overview, "time", SimpleNamespace(perf_counter=lambda: next(ticks))
    )
    at = _app()
    assert not at.exception and not at.error
    states, width = len(at.dataframe[0].value), 384  # MiniLM: emb + 6 layers of 384 dims
    caption = next(c.value for c in at.caption if "token sample" in c.value)
    sample = int(re.search(r"token sample ([\d,]+)", caption).group(1).replace(",", ""))
    kept = throughput.seconds_per_token_parameter(
        ResultCache().root, throughput.STATISTICS_DEVICE, states * width
    )
    assert kept == pytest.approx(12.5 / (sample * states * width))
