"""AppTest: the decision and recipe section of the Quantization readiness page
(ui/views/quant/decision.py): the decision in one paragraph, and the share slider moves the
ignore list."""

from __future__ import annotations

from tests.app.pages.quant.helpers import ran, rerun, subheaders


def test_the_decision_and_the_share_slider(tiny_llama_dir):
    at = ran(str(tiny_llama_dir))
    assert any(m.value.startswith("**Decision: W8A8") for m in at.markdown)
    at.slider(key="quant_ignore_share").set_value(0.0)
    rerun(at)
    assert any("keep only lm_head" in m.value for m in at.markdown)
    assert subheaders(at) == ["Decision and recipe", "Layers × role"]
