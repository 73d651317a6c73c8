"""Hooks as the SAE formats name them, mapped onto isoscope's states (or refused)."""

from __future__ import annotations

import pytest

from isoscope.analysis.sae.formats import hook_state
from isoscope.engine.errors import ModelLoadError


@pytest.mark.parametrize(
    "hook,state",
    [
        ("blocks.12.hook_resid_post", 13),
        ("blocks.0.hook_resid_post", 1),
        ("blocks.5.hook_resid_pre", 5),
        ("blocks.0.hook_resid_pre", 0),
        ("model.layers.12.output", 13),
        ("layers.3", 4),
        ("layers_3", 4),
        ("model.layers.2.input", 2),
        ("hook_embed", 0),
        ("embed_tokens", 0),
        ("", None),
    ],
)
def test_hooks_map_onto_isoscope_states(hook, state):
    assert hook_state(hook) == state


@pytest.mark.parametrize(
    "hook", ["blocks.3.hook_mlp_out", "blocks.3.attn.hook_z", "blocks.3.hook_resid_mid",
             "mlp_out of layer 4", "layers.3.mlp"],
)  # fmt: skip
def test_other_sites_are_refused_in_one_line(hook):
    with pytest.raises(ModelLoadError, match="not a residual-stream hidden state") as caught:
        hook_state(hook)
    assert "\n" not in str(caught.value)
