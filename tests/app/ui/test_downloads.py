"""Every JSON download is strict JSON (issue 23): written by ``isoscope.ui.sharing.downloads.json_payload``
(``isoscope.engine.jsonio.strict_json``: NaN and inf become null, as in the CLI's files), and parsed
here with ``json.loads(..., parse_constant=...)`` that refuses the bare NaN token.

``tests/app/conftest.py`` checks every JSON download any app test draws; this file opens each of
them on tiny random models, and checks that no ui/ or pages/ module writes JSON itself."""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from isoscope.engine.extraction import ExtractionSettings
from isoscope.ui.frame.selection import Selection
from isoscope.ui.frame.session import SELECTION_KEY
from tests.app.conftest import JSON_DOWNLOADS, parse_strict

ROOT = Path(__file__).resolve().parents[3]
APP = str(ROOT / "app.py")
TIMEOUT = 600
TINY_BERT = "random:bert:layers=2,width=64,heads=2,seed=0"
TEXTS = "Summer is warm. Winter is cold.\nThe cat sat on the mat.\nRivers run to the sea."


def _sources() -> dict[Path, str]:
    files = [*ROOT.glob("pages/*.py"), *ROOT.glob("ui/**/*.py")]
    return {f: f.read_text() for f in files}


def test_no_page_or_ui_module_writes_json_itself():
    writers = [str(f.relative_to(ROOT)) for f, text in _sources().items() if "json.dumps" in text]
    assert writers == [], (
        "JSON downloads go through isoscope.ui.sharing.downloads.download_buttons(json_data=...)"
    )


def test_parse_strict_refuses_nan():
    with pytest.raises(ValueError, match="NaN"):
        parse_strict('{"a": NaN}')
    assert parse_strict('{"a": null}') == {"a": None}


def _nan_download() -> None:
    import numpy as np

    from isoscope.ui.sharing.downloads import download_buttons

    download_buttons(
        "nan_test",
        json_data={"nan": float("nan"), "f32": np.float32(1.5), "arr": np.array([np.inf, 2.0])},
    )


def test_a_nan_in_a_download_is_written_as_null():
    at = AppTest.from_function(_nan_download)
    at.run()
    assert not at.exception
    assert parse_strict(JSON_DOWNLOADS["dl_json_nan_test"]) == {
        "nan": None,
        "f32": 1.5,
        "arr": [None, 2.0],
    }


def _key_pattern(node: ast.expr) -> str | None:
    """A download key as written: a string, or an f-string whose fields become ``*`` (fnmatch);
    None for a key passed on in a variable (a helper's own call)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "*" for v in node.values)
    return None


def _json_keys_in_sources() -> set[str]:
    """The key (an fnmatch pattern) of every ``download_buttons(...)`` call that passes
    ``json_data``, and of every ``chart_with_downloads(..., downloads=...)`` call (ui/widgets/charts.py)
    that does."""
    keys = set()
    for text in _sources().values():
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Call) or not any(
                k.arg == "json_data" for k in node.keywords
            ):
                continue
            called = getattr(node.func, "id", None)
            if called == "download_buttons":
                key = node.args[0]
            elif called == "chart_with_downloads":
                key = next(k.value for k in node.keywords if k.arg == "downloads")
            else:
                continue
            pattern = _key_pattern(key)
            if pattern is not None:
                keys.add("dl_json_" + pattern)
    return keys


def _app(model: str, page: str, kind: str = "paste", corpus: str = TEXTS, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state[SELECTION_KEY] = Selection(
        model_source=model,
        corpus_kind=kind,
        corpus_text=corpus,
        settings=ExtractionSettings(max_length=32, sample_size=2000),
    )
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _rerun(at: AppTest, **state) -> None:
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]


@pytest.fixture(scope="module")
def checkpoint_folder(tmp_path_factory) -> Path:
    from isoscope.engine.load.models import build_random_model, bundled_tokenizer

    tokenizer = bundled_tokenizer()
    root = tmp_path_factory.mktemp("run")
    for seed, step in enumerate((10, 20)):
        model = build_random_model(
            "bert", {"layers": 2, "width": 32, "heads": 2, "seed": seed}, len(tokenizer)
        )
        model.save_pretrained(root / f"checkpoint-{step}")
        tokenizer.save_pretrained(root / f"checkpoint-{step}")
    return root


@pytest.fixture(scope="module")
def image_run(tmp_path_factory) -> tuple[str, str]:
    from tests.media_models import image_folder, save_image_model

    root = tmp_path_factory.mktemp("images")
    return str(save_image_model("vit", root / "vit")), str(image_folder(root / "imgs", 4))


@pytest.fixture(scope="module")
def audio_run(tmp_path_factory) -> tuple[str, str]:
    from tests.media_models import audio_folder, save_whisper

    root = tmp_path_factory.mktemp("audio")
    return str(save_whisper(root / "whisper")), str(audio_folder(root / "clips"))


def test_every_json_download_of_every_page_is_strict(
    tiny_llama_dir, checkpoint_folder, image_run, audio_run
):
    """Open every JSON download of the app (the conftest fixture parses each as it is drawn)."""
    JSON_DOWNLOADS.clear()
    _app(TINY_BERT, "outliers")
    _app(TINY_BERT, "dimension")  # the card's own download

    at = _app(TINY_BERT, "positional")
    for tab in ("Position probe", "TUPE decomposition", "Variance lab (NoPE)", "Queries & keys"):
        _rerun(at, pos_tab=tab, pos_var_width=64, pos_var_seq=64, pos_var_seeds=1)

    at = _app(TINY_BERT, "layernorm", ln_tab="counts per LayerNorm")
    at.radio(key="ln_dims_mode").set_value("typed")
    at.text_input(key="ln_dims_text").set_value("1, 2")
    at.slider(key="ln_texts").set_value(2)
    at.slider(key="ln_controls").set_value(1)
    at.button(key="ln_ablation_run").click().run()
    at.slider(key="ln_sweep_texts").set_value(2)
    at.button(key="ln_sweep_run").click().run()
    assert not at.exception, [e.value for e in at.exception]

    at = _app(str(tiny_llama_dir), "massive", massive_max_length=16)
    for tab in ("Attention sinks", "int8 outlier features"):
        _rerun(at, massive_tab=tab)

    at = _app(TINY_BERT, "compare")
    at.text_area(key="cmp_traj_paths").input(str(checkpoint_folder)).run()
    at.button(key="cmp_traj_run").click().run()
    assert not at.exception, [e.value for e in at.exception]

    at = _app(str(tiny_llama_dir), "quant")
    at.button(key="quant_run").click().run()
    for tab in ("Sensitivity", "Sites"):
        _rerun(at, quant_tab=tab, quant_prefix=True)  # the layer-wise curve's download too

    vit, images = image_run  # the views only image analyses have
    _app(vit, "massive", kind="images", corpus=images)
    _app(vit, "positional", kind="images", corpus=images, pos_tab="Position probe")
    whisper, clips = audio_run  # and speech encoders
    _app(whisper, "massive", kind="audio", corpus=clips)

    expected = _json_keys_in_sources()
    assert len(expected) >= 13
    drawn = {pattern: fnmatch.filter(JSON_DOWNLOADS, pattern) for pattern in expected}
    assert all(drawn.values()), f"not drawn: {sorted(p for p, keys in drawn.items() if not keys)}"
    for key in {k for keys in drawn.values() for k in keys}:
        parse_strict(JSON_DOWNLOADS[key])
