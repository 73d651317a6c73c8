"""The conformance zoo: a tiny random checkpoint (2 layers, width 64) of every decoder and encoder
family transformers builds from a small config (``tests/zoo.py``), saved with a tokenizer and loaded
through isoscope's real loader. Per family: the causal flag against its definition, the hooked
hidden states against HF's own, the discovered norm -> projection wiring against the module graph,
every in-process analysis works or refuses in one line (queries/keys, both rotations: works on every
family with attention except the few listed, whose line says what could not be found), and one
CLI run (``massive``) exits 0, or 2 with one line, never "internal error"."""

from __future__ import annotations

import pytest

from tests import zoo
from tests.zoo_checks import (
    cli_smoke,
    empirical_causal,
    hidden_states_match,
    run_analyses,
    wiring_errors,
)

# families whose norm views are refused, and the reason their one line must give
NORMS_REFUSED = {"albert": "share one module", "olmo": "no parameters"}
# Families whose quantization sites have no "MLP output" role: their MLPs are routed MoE experts,
# which backend/analysis/quant/sites.py skips (with a note).
NO_MLP_OUTPUT_SITE = {"mixtral", "qwen3_moe", "gpt_oss"}
# Families whose queries/keys are refused (rotation applied, the default / before), and what the
# one line must say could not be found. Every other family with attention gets the view.
QK_REFUSED = {"albert": "shares one layer module", "roformer": "no rotary (cos, sin)"}
QK_BEFORE_REFUSED = {"albert": "shares one layer module", "llama4_text": "no rotary (cos, sin)"}


@pytest.fixture(scope="session")
def zoo_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("zoo")
    return {family: zoo.build(family, root / family) for family in zoo.FAMILIES}


@pytest.mark.parametrize("family", list(zoo.TEXT_FAMILIES))
def test_family_is_read_right(family, zoo_dirs, tmp_path):
    from isoscope.engine.load.models import load_model

    loaded = load_model(str(zoo_dirs[family]), device="cpu")
    assert loaded.info.is_causal == empirical_causal(loaded.model) == (family in zoo.DECODERS)
    assert loaded.info.position_embedding != "unknown"
    assert hidden_states_match(loaded) < 1e-4
    if family != "albert":  # one shared layer module: refused, checked below
        assert wiring_errors(loaded) == []
    results = run_analyses(loaded)
    assert results["hidden states"] == "works" and results["massive + sinks"] == "works"
    if family in NO_MLP_OUTPUT_SITE:
        assert results["quant sites"].startswith("refused: no MLP output site")
    elif family != "albert":  # quantization sites come from the same trace as the wiring
        assert results["quant sites"] == "works", results["quant sites"]
    if family in NORMS_REFUSED:
        assert results["norms"].startswith("refused:") and NORMS_REFUSED[family] in results["norms"]
    else:
        assert results["norms"] == "works"
    for analysis, refused in (("queries/keys", QK_REFUSED), ("q/k before RoPE", QK_BEFORE_REFUSED)):
        if family in refused:
            assert results[analysis].startswith("refused:"), results[analysis]
            assert refused[family] in results[analysis]
        else:
            assert results[analysis] == "works", results[analysis]
    if family in zoo.ENCODER_DECODERS:  # the encoder, and the card says the decoder is not read
        assert loaded.info.role.startswith("text encoder") and "not analysed" in loaded.info.role
    rc, line = cli_smoke(zoo_dirs[family], tmp_path)
    assert rc in (0, 2) and "internal error" not in line
    assert rc == 0 or line, "exit 2 must say why in one line"


@pytest.mark.parametrize("family", list(zoo.AUDIO))
def test_speech_family_is_read_right(family, zoo_dirs, tmp_path):
    """Whisper: the encoder of an encoder-decoder, read as audio from its forward although its
    folder has a tokenizer; the clip analyses work and the text-only ones refuse in one line."""
    from isoscope.engine.load.models import load_model

    loaded = load_model(str(zoo_dirs[family]), device="cpu")
    assert loaded.info.modality == "audio" and not loaded.info.is_causal
    assert loaded.info.role.startswith("speech encoder (Whisper), encoder of an encoder-decoder")
    assert wiring_errors(loaded) == []
    results = run_analyses(loaded)
    for name in ("hidden states", "norms", "massive + sinks", "position table"):
        assert results[name] == "works", (name, results[name])
    for name, result in results.items():
        assert result == "works" or (result.startswith("refused: ") and "\n" not in result), name
    rc, line = cli_smoke(zoo_dirs[family], tmp_path, audio=True)
    assert rc == 0, line
