"""The report on the bundled MiniLM (in process), on a random BERT through the CLI (byte-identical
to the in-process build the app's download uses), on a tiny random Llama decoder saved to a temp
dir, and on the bundled SmolLM2 decoder when this build has it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from isoscope.share.report import ReportSettings, build_report
from tests.clirun import run_backend

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "assets" / "sample_corpus.txt"
RANDOM_BERT = "random:bert:layers=2,width=32,heads=2"


def run_cli(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    return run_backend(*args, cache_dir=cache_dir)


def _plotly_once(page: str) -> None:
    assert page.count('<script type="text/javascript">/**') == 1
    assert not re.search(r"<script[^>]*\bsrc=", page)


def test_report_on_the_default_model(minilm, minilm_result, tmp_path):
    from isoscope.engine.inputs.pairs import sts_sample

    pairs = sts_sample()
    rep = build_report(
        minilm, minilm_result, pairs=(pairs.sentence1, pairs.sentence2, pairs.scores)
    )
    outliers = rep.section("outliers")
    assert outliers.findings[0].startswith("Dimension 223 holds the minimum of")
    numbers = re.search(r"cuts anisotropy from (\d\.\d+) to (\d\.\d+)", outliers.findings[0])
    assert float(numbers.group(1)) > 0.15 > float(numbers.group(2))
    layernorm = rep.section("layernorm")
    assert layernorm.skipped is None
    assert "223" in layernorm.findings[0]
    assert "more damage than any random control" in layernorm.findings[1]
    assert any("STS Spearman" in f for f in layernorm.findings)
    positional = rep.section("positional")
    accuracy = re.search(r"accuracy (\d\.\d+) at emb and (\d\.\d+)", positional.findings[0])
    assert float(accuracy.group(1)) > 0.8 > float(accuracy.group(2))
    assert any("position table" in f for f in positional.findings)
    assert rep.section("similarity").skipped is None
    assert "encoder" in rep.section("massive").skipped
    cards = rep.section("dimension")
    assert cards.skipped is None, cards.skipped
    assert cards.findings[0].startswith("Dimension 223 at state ")
    assert "largest writers" in " ".join(caption for caption, _ in cards.tables)
    page = rep.to_html()
    _plotly_once(page)
    assert page.count('class="figure"') >= 6
    assert "Left out: the model is an encoder" in page


def test_report_cli_on_a_random_bert_equals_the_in_process_report(tmp_path):
    out = tmp_path / "report.html"
    proc = run_cli(
        "report",
        "--model",
        RANDOM_BERT,
        "--texts",
        str(CORPUS),
        "--out",
        str(out),
        "--ablation-texts",
        "8",
        "--quant",
        "--quant-texts",
        "8",
        cache_dir=tmp_path / "cache",
    )
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stderr and "Traceback" not in proc.stderr
    page = out.read_text(encoding="utf-8")
    _plotly_once(page)
    # --quant adds the opt-in section, after the default ones
    quant = page[page.index('<section id="quant">') :]
    assert quant.startswith(
        '<section id="quant"><h2>Quantization readiness</h2>\n<ul class="findings">'
    )
    assert page.index('<section id="massive">') < page.index('<section id="quant">')
    assert "Left out: no LayerNorm outlier dims" in page
    assert "random-init LayerNorm has gamma 1 and beta 0" in page
    assert "Left out: no sentence pairs given" in page
    # The app's download builds the same report from the same extraction: same bytes.
    from isoscope.engine.extraction import ExtractionSettings
    from isoscope.engine.inputs.corpus import load_corpus_file
    from isoscope.engine.load.models import load_model
    from isoscope.engine.store.cache import ResultCache
    from isoscope.engine.store.cached_extract import cached_extract

    loaded = load_model(RANDOM_BERT, device="cpu")
    result = cached_extract(
        loaded, load_corpus_file(CORPUS), ExtractionSettings(), None, ResultCache(tmp_path / "c2")
    )
    from isoscope.share.report import SECTIONS

    rebuilt = build_report(
        loaded,
        result,
        settings=ReportSettings(ablation_texts=8, quant_texts=8),
        sections=(*SECTIONS, "quant"),
    )
    assert rebuilt.to_html() == page


def _decoder_report(source: str, n_texts: int = 40, max_length: int = 128):
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import bundled_corpus, corpus_from_text
    from isoscope.engine.load.models import load_model

    loaded = load_model(source, device="cpu")
    corpus = corpus_from_text("\n".join(bundled_corpus().texts[:n_texts]))
    result = extract(loaded, corpus, ExtractionSettings(max_length=max_length, sample_size=2000))
    return loaded, build_report(loaded, result, settings=ReportSettings(massive_texts=n_texts))


def test_report_on_a_tiny_llama_decoder(tiny_llama_dir):
    loaded, rep = _decoder_report(str(tiny_llama_dir))
    assert loaded.info.is_causal
    assert "No learned absolute position table" in " ".join(rep.section("positional").notes)
    assert rep.section("layernorm").skipped.startswith("no LayerNorm outlier dims")
    massive = rep.section("massive")
    try:
        import isoscope.analysis.massive.scan  # noqa: F401
    except ImportError:
        assert (
            massive.skipped
            == "this isoscope build has no massive-activation or attention-sink analysis"
        )
        return
    assert massive.skipped is None, massive.skipped
    text = " ".join(massive.findings)
    assert "massive activations" in text.lower() and "Attention sinks:" in text
    assert len(massive.figures) == 1
    _plotly_once(rep.to_html())


def test_report_on_smollm2():
    from isoscope.engine.errors import ModelLoadError

    try:
        loaded, rep = _decoder_report("smollm2", n_texts=16, max_length=64)
    except ModelLoadError as exc:
        pytest.skip(f"no bundled SmolLM2 in this build: {exc}")
    assert loaded.info.is_causal
    massive = rep.section("massive")
    assert massive.skipped is None, massive.skipped
    assert any("massive" in f.lower() for f in massive.findings)
    assert all(s.skipped is None or not s.skipped.startswith("could not") for s in rep.sections)


def test_report_cli_bad_inputs(tmp_path):
    proc = run_cli(
        "report", "--texts", str(CORPUS), "--out", str(tmp_path), cache_dir=tmp_path / "c"
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: --out {str(tmp_path)!r} is a folder; give a file name such as report.html"
    ]
    proc = run_cli(
        "report",
        "--texts",
        str(tmp_path / "missing.txt"),
        "--out",
        str(tmp_path / "r.html"),
        cache_dir=tmp_path / "c",
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists()
