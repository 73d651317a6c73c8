"""`isoscope analyze --model org/name[@revision]` against the stand-in Hub: the JSON records the
commit, and a failure is one line on stderr with exit status 2."""

from __future__ import annotations

import json

from backend.cli import main


def test_analyze_downloads_and_records_the_revision(standin_hub, tiny_bert_dir, tmp_path, capsys):
    sha = standin_hub.add_folder("org/tiny-bert", tiny_bert_dir)
    texts = tmp_path / "texts.txt"
    texts.write_text("The bank raised its rates.\nWe sat on the river bank.\n", encoding="utf-8")
    out = tmp_path / "out.json"
    argv = ["analyze", "--model", "org/tiny-bert@main", "--texts", str(texts), "--out", str(out)]
    code = main(
        [*argv, "--device", "cpu", "--max-length", "16", "--cache-dir", str(tmp_path / "c")]
    )
    assert code == 0, capsys.readouterr().err
    assert json.loads(out.read_text())["model"]["revision"] == sha
    assert f"revision {sha}" in capsys.readouterr().err


def test_a_gated_repo_is_one_line_on_stderr(standin_hub, tiny_bert_dir, tmp_path, capsys):
    standin_hub.add_folder("org/gated", tiny_bert_dir)
    standin_hub.repos["org/gated"].token = "hf_secret"
    texts = tmp_path / "texts.txt"
    texts.write_text("One text.\n", encoding="utf-8")
    argv = ["analyze", "--model", "org/gated", "--texts", str(texts), "--out", str(tmp_path / "o")]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "HF_TOKEN" in err and "Traceback" not in err
