"""``isoscope ablate`` end to end: JSON keys, MLM loss, default model, bad inputs."""

from __future__ import annotations

import json

import pytest

from isoscope.cli import main

KEYS = {"dims", "ln_outliers", "effect", "random_controls"}
EFFECT_KEYS = {"embedding_cosine", "mlm_loss", "mlm_loss_original"}


@pytest.fixture(scope="module")
def texts_file(tmp_path_factory, bundled):
    path = tmp_path_factory.mktemp("ablate") / "texts.txt"
    path.write_text("\n".join(bundled.texts[:10]))
    return path


def test_tiny_mlm_checkpoint(tiny_bert_mlm_dir, texts_file, tmp_path):
    out = tmp_path / "out.json"
    rc = main(
        [
            "ablate",
            "--model",
            str(tiny_bert_mlm_dir),
            "--texts",
            str(texts_file),
            "--out",
            str(out),
            "--dims",
            "2,5",
            "--random-controls",
            "2",
            "--device",
            "cpu",
        ]
    )
    assert rc == 0
    data = json.loads(out.read_text())
    assert KEYS <= set(data) and data["dims"] == [2, 5]
    assert EFFECT_KEYS <= set(data["effect"])
    assert isinstance(data["effect"]["mlm_loss"], float) and isinstance(
        data["effect"]["mlm_loss_original"], float
    )
    assert len(data["effect"]["embedding_cosine"]) == 3  # emb, 1, 2
    assert len(data["random_controls"]) == 2
    for control in data["random_controls"]:
        assert len(control["dims"]) == 2 and not set(control["dims"]) & {2, 5}
        assert EFFECT_KEYS <= set(control["effect"]) and control["effect"]["mlm_loss"] is not None
    assert data["ln_outliers"] == []  # random init: gamma 1, beta 0


def test_default_model_auto_dims(texts_file, tmp_path):
    out = tmp_path / "out.json"
    rc = main(
        [
            "ablate",
            "--model",
            "default",
            "--texts",
            str(texts_file),
            "--out",
            str(out),
            "--random-controls",
            "2",
            "--device",
            "cpu",
            "--max-length",
            "48",
        ]
    )
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["dims"] == [row["dim"] for row in data["ln_outliers"]] and 223 in data["dims"]
    assert data["effect"]["mlm_loss"] is None and data["effect"]["mlm_loss_original"] is None
    assert len(data["effect"]["embedding_cosine"]) == 7
    final = data["effect"]["embedding_cosine"][-1]
    assert all(final < c["effect"]["embedding_cosine"][-1] for c in data["random_controls"])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--dims", "abc"], "not an integer"),
        (["--dims", "1,400"], "out of range"),
        (["--random-controls", "-1"], "random-controls"),
        (["--norms", "L9.out_ln"], "unknown LayerNorm"),
        (["--dims", "auto"], "no LayerNorm outlier dims"),
    ],
)
def test_bad_inputs_exit_2_with_one_line(
    tiny_bert_dir, texts_file, tmp_path, capsys, extra, message
):
    rc = main(
        [
            "ablate",
            "--model",
            str(tiny_bert_dir),
            "--texts",
            str(texts_file),
            "--out",
            str(tmp_path / "o.json"),
            "--device",
            "cpu",
            *extra,
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error:") and message in err[-1]
    assert not (tmp_path / "o.json").exists()


def test_missing_text_file_exits_2(tmp_path, capsys):
    rc = main(["ablate", "--texts", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "o.json")])
    assert rc == 2 and capsys.readouterr().err.strip().startswith("error:")


def test_ablate_an_image_folder_reports_the_final_state_cosine(tmp_path, capsys):
    from tests.media_models import image_folder, save_image_model

    model = save_image_model("vit", tmp_path / "vit")
    images = image_folder(tmp_path / "images")
    out = tmp_path / "o.json"
    rc = main(
        ["ablate", "--model", str(model), "--images", str(images), "--dims", "0,1",
         "--random-controls", "2", "--out", str(out), "--device", "cpu"]
    )  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    report = json.loads(out.read_text())
    assert report["end_metric"] == "final_state_cosine" and report["corpus"]["kind"] == "image"
    assert len(report["final_state_cosine"]["controls"]) == 2
    assert report["effect"]["mlm_loss"] is None


def test_ablate_refuses_pairs_for_audio(tmp_path, capsys):
    rc = main(
        ["ablate", "--audio", "demo", "--pairs", "p.csv", "--out", str(tmp_path / "o.json")]
    )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and "--pairs needs --texts" in err[-1]
