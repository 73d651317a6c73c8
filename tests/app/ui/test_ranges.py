"""The widgets a link can set are built from their ui/widgets/ranges.py declaration: same options, bounds
and defaults as the ones ui/sharing/links.py validates against."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from isoscope.analysis.layernorm.thresholds import LN_K, LN_SHARE
from isoscope.analysis.massive.params import MASSIVE_MAX_LENGTH
from isoscope.engine.extraction import ExtractionSettings
from isoscope.engine.params import SEED
from isoscope.share import tour
from isoscope.ui.frame.selection import Selection
from isoscope.ui.frame.session import SELECTION_KEY
from isoscope.ui.widgets import ranges

APP = str(Path(__file__).resolve().parents[3] / "app.py")
TINY_BERT = "random:bert:layers=2,width=32,heads=2,seed=0"


def _page(page: str, model: str = TINY_BERT) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state[SELECTION_KEY] = Selection(
        model_source=model,
        corpus_kind="paste",
        corpus_text="A cat sat on the mat.\nThe river bank was muddy.\nRates rose again.",
        settings=ExtractionSettings(max_length=32, sample_size=2000),
    )
    at.run()
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _strings(options) -> list[str]:
    return [str(o) for o in options]


def test_layernorm_sliders_and_projection_controls_follow_their_declarations():
    at = _page("layernorm")
    for key, spec in (("ln_k", LN_K), ("ln_share", LN_SHARE)):
        slider = at.slider(key=key)
        assert (slider.min, slider.max, slider.value) == (spec.low, spec.high, spec.default)
        assert slider.step == spec.step
    at = _page("projections")
    assert at.radio(key="proj_data").options == _strings(ranges.PROJ_DATA.options)
    method = at.selectbox(key="proj_method")
    assert len(method.options) == len(ranges.PROJ_METHOD.options)
    seed = at.number_input(key="proj_seed")
    assert (seed.min, seed.max, seed.value) == (SEED.low, SEED.high, SEED.default)
    assert len(at.selectbox(key="proj_post").options) == len(ranges.PROJ_POST.options)


def test_choice_widgets_follow_their_declarations(tiny_llama_dir):
    at = _page("outliers")
    assert at.radio(key="out_stat").options == _strings(ranges.OUT_STAT.options)
    at = _page("compare")
    assert at.radio(key="cmp_mode").options == _strings(ranges.CMP_MODE.options)
    at = _page("tour")
    steps = [f"{s}. {t}" for s, t in zip(ranges.TOUR_STEP.options, tour.TITLES, strict=True)]
    assert at.radio(key="tour_step").options == steps
    at = _page("massive", model=str(tiny_llama_dir))
    lengths = at.select_slider(key="massive_max_length")
    assert lengths.options == _strings(MASSIVE_MAX_LENGTH.choices)
    assert lengths.value == MASSIVE_MAX_LENGTH.default
