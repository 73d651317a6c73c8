"""Every page on one model of each new kind of the second zoo (tests/zoo_recent.py): a hybrid
(Qwen3.5: Gated DeltaNet + full attention), a state-space model (Mamba-2), multi-head latent
attention (DeepSeek-V3) and Gemma 3n (AltUp streams). Each page opens with no exception and no
traceback; a view that does not apply says so in one line. The Overview's card names the layer
pattern."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from isoscope.engine.extraction import ExtractionSettings
from isoscope.ui.frame.selection import Selection
from tests import zoo_recent

APP = str(Path(__file__).resolve().parents[3] / "app.py")
PAGES = sorted(p.stem for p in (Path(APP).parent / "pages").glob("*.py") if p.stem != "__init__")
FAMILIES = (zoo_recent.HYBRID, zoo_recent.SSM, zoo_recent.MLA, zoo_recent.ALTUP)
TEXTS = "\n".join(
    [
        "the cat sat on the w3 . w7 w9",
        "a dog , the w1 w2 w5 sat !",
        "w11 w12 w13 the cat on a dog ; w20",
        "the w4 .",
        "w5 w6 w7 w8 w9 w10 the dog sat",
        "on the cat , a w30 w31",
    ]
)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("recent-pages")
    return {f: str(zoo_recent.build(f, root / f)) for f in FAMILIES}


def open_page(folder: str, page: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state["isoscope_selection"] = Selection(
        model_source=folder,
        device="cpu",
        corpus_kind="paste",
        corpus_text=TEXTS,
        settings=ExtractionSettings(max_length=32, sample_size=200),
    )
    at.run()
    return at.switch_page(f"pages/{page}.py").run()


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_page_opens_on_the_new_kinds(folders, family, page):
    at = open_page(folders[family], page)
    assert not at.exception, [e.value for e in at.exception]
    shown = " ".join(str(e.value) for e in (*at.error, *at.warning, *at.info, *at.markdown))
    assert "Traceback" not in shown and "internal error" not in shown.lower()
    assert "unexpected error" not in shown  # the frame's guard (ui/frame/failure.py) caught nothing
    if page == "overview":
        cells = " ".join(str(t.value.to_dict()) for t in at.table)  # the model card
        assert "4 layers: " in cells
        assert {
            zoo_recent.HYBRID: "2 Gated DeltaNet, 2 full attention",
            zoo_recent.SSM: "4 layers: Mamba-2",
            zoo_recent.MLA: "4 layers: latent attention (MLA)",
            zoo_recent.ALTUP: "AltUp x 4 streams",
        }[family] in cells
