"""CLI: ``isoscope positional`` and ``isoscope nope`` JSON shapes and bad input."""

from __future__ import annotations

import json

import pytest

from isoscope.cli import main

TEXTS = "\n".join(
    [
        "The cat sat on the mat and looked at the birds outside.",
        "Rain fell all night over the quiet little town.",
        "She wrote three letters before breakfast.",
        "Numbers can be added, multiplied and compared.",
        "The river carried the boat slowly towards the sea.",
        "A good book is a friend for a long evening.",
        "He forgot his keys again this morning.",
        "Trains leave every hour from the main station.",
        "Bright stars shone above the dark mountains.",
        "They planted tomatoes and beans in the garden.",
    ]
)


@pytest.fixture()
def texts_file(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text(TEXTS)
    return path


def test_positional_json_on_a_tiny_bert(tiny_bert_dir, texts_file, tmp_path):
    out = tmp_path / "positional.json"
    code = main(
        [
            "positional",
            "--model",
            str(tiny_bert_dir),
            "--texts",
            str(texts_file),
            "--out",
            str(out),
            "--max-length",
            "32",
            "--no-cache",
            "--tupe-texts",
            "4",
            "--probe-iter",
            "10",
        ]
    )
    assert code == 0
    payload = json.loads(out.read_text())
    assert len(payload["probe_accuracy"]) == 3  # emb + 2 layers
    assert all(0.0 <= a <= 1.0 for a in payload["probe_accuracy"])
    tupe = payload["tupe"]
    assert set(tupe["term_share"]) == {
        "word_word",
        "word_position",
        "position_word",
        "position_position",
    }
    assert sum(tupe["term_share"].values()) == pytest.approx(1.0)
    assert tupe["max_abs_error"] < 1e-5


def test_positional_without_a_position_table_gives_null_tupe(texts_file, tmp_path):
    out = tmp_path / "nope_model.json"
    code = main(
        [
            "positional",
            "--model",
            "random:bert-nope:layers=1,width=32,heads=2",
            "--texts",
            str(texts_file),
            "--out",
            str(out),
            "--max-length",
            "16",
            "--no-cache",
            "--probe-iter",
            "5",
        ]
    )
    assert code == 0
    payload = json.loads(out.read_text())
    assert payload["tupe"] is None
    assert len(payload["probe_accuracy"]) == 2


@pytest.mark.parametrize("bidirectional", [False, True])
def test_nope_json(tmp_path, bidirectional):
    out = tmp_path / "nope.json"
    argv = [
        "nope",
        "--d-model",
        "64",
        "--layers",
        "2",
        "--heads",
        "2",
        "--seq-len",
        "64",
        "--seeds",
        "2",
        "--out",
        str(out),
    ]
    assert main(argv + (["--bidirectional"] if bidirectional else [])) == 0
    payload = json.loads(out.read_text())
    assert [layer["index"] for layer in payload["layers"]] == [0, 1]
    assert all(len(layer["attn_output_variance"]) == 64 for layer in payload["layers"])
    assert len(payload["theory"]) == 64
    slope = payload["layers"][0]["slope"]
    if bidirectional:
        assert abs(slope) < 0.1
    else:
        assert -1.3 < slope < -0.6


@pytest.mark.parametrize(
    "argv, message",
    [
        (["nope", "--d-model", "100", "--heads", "3"], "divisible"),
        (["nope", "--seq-len", "2"], "sequence length"),
        (["nope", "--inputs", "words"], "inputs must be one of"),
        (["positional", "--texts", "/nonexistent/texts.txt"], "texts"),
        (
            ["positional", "--model", "random:bert", "--texts", "TEXTS", "--test-fraction", "0.99"],
            "held-out fraction",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, tmp_path, texts_file, capsys):
    argv = [str(texts_file) if a == "TEXTS" else a for a in argv] + [
        "--out",
        str(tmp_path / "x.json"),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error:")
    assert message in err[-1]
    assert not (tmp_path / "x.json").exists()
