"""`isoscope analyze` on a copy of a checkpoint already analysed elsewhere: the JSON names the copy
(the statistics come from the cache, with one line saying from which path)."""

from __future__ import annotations

import json
import shutil


def test_the_json_of_a_copied_checkpoint_names_the_copy(run_analyze, tiny_bert_dir, tmp_path):
    first, second = tmp_path / "first", tmp_path / "copy"
    shutil.copytree(tiny_bert_dir, first)
    shutil.copytree(tiny_bert_dir, second)
    texts = tmp_path / "texts.txt"
    texts.write_text("The bank raised its rates.\nWe sat on the river bank.\n", encoding="utf-8")
    models = []
    for folder in (first, second):
        out = tmp_path / f"{folder.name}.json"
        args = ("--model", str(folder), "--texts", str(texts), "--device", "cpu")
        proc = run_analyze(*args, "--max-length", "16", "--out", str(out), cache_dir=tmp_path / "c")
        assert proc.returncode == 0, proc.stderr
        models.append(json.loads(out.read_text())["model"])
    assert [m["path"] for m in models] == [str(first.resolve()), str(second.resolve())]
    assert models[1]["source"] == models[1]["display_name"] == str(second)
    assert "reused_from" not in models[0]
    assert models[1]["reused_from"]["path"] == str(first.resolve())
