"""`isoscope analyze --model org/name[@revision]` against the stand-in Hub: the JSON records the
commit, and a failure is one line on stderr with exit status 2."""

from __future__ import annotations

import json

from isoscope.cli import main


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
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("error: ") and "licence" in err and "HF_TOKEN" in err
    assert "again to resume" not in err  # a gated repo's 401 is not a dropped download


def test_the_first_page_time_is_on_stderr_before_the_weights_download(
    standin_hub, tiny_bert_dir, tmp_path, capsys, monkeypatch
):
    from isoscope.engine.budget import throughput
    from isoscope.engine.budget.estimates import describe_seconds
    from isoscope.engine.load import hub, preflight

    standin_hub.add_folder("org/tiny-bert", tiny_bert_dir)
    parameters = sum(preflight.folder_census(tiny_bert_dir).values())
    cache = tmp_path / "c"
    throughput.record(cache, "cpu", parameters, 100, 10.0)  # 0.1 s per token: a slow device
    weights_requested_at_line = []
    real_file = hub._Downloader.file

    def file(self, name):  # the stderr lines written when the weights download starts
        if name == "model.safetensors":
            weights_requested_at_line.append(capsys.readouterr().err)
        return real_file(self, name)

    monkeypatch.setattr(hub._Downloader, "file", file)
    texts = tmp_path / "texts.txt"
    texts.write_text("The bank raised its rates.\nWe sat on the river bank.\n", encoding="utf-8")
    argv = ["analyze", "--model", "org/tiny-bert", "--texts", str(texts), "--out", str(tmp_path)]
    code = main(
        [*argv[:-1], str(tmp_path / "o.json"), "--device", "cpu", "--cache-dir", str(cache)]
    )
    assert code == 0
    (before,) = weights_requested_at_line
    # from "first page:" on: a download bar that ran half a second leaves its line open
    (line,) = [ln[ln.index("first page:") :] for ln in before.splitlines() if "first page:" in ln]
    tokens = int(line.split(" x ")[1].split(" tokens")[0].replace(",", ""))
    assert tokens > 4  # both texts, special tokens included
    extraction_s = throughput.extraction_seconds(0.1 / parameters, parameters, tokens)
    assert line.startswith("first page: ") and ": download about " in line  # the weights' phase
    assert f"extraction {describe_seconds(extraction_s)} (" in line
