"""Shared fixtures: tiny random checkpoints saved to a temp dir and loaded through the real loader,
the bundled MiniLM, and an isolated extraction cache for every test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from isoscope.engine.environment import use_offline_environment

use_offline_environment()
# No background UMAP compilation in tests (a minute of CPU); the projections tests opt back in.
os.environ.setdefault("ISOSCOPE_UMAP_WARMUP", "0")
# Nor a compiled statistics kernel: every test but the kernel's own (which opt in) runs the eager
# moments, so no test's figures depend on whether another test compiled first.
os.environ.setdefault("ISOSCOPE_COMPILE", "0")

ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config, items):
    """Tier marker from the folder: tests/unit/** -> unit, tests/integration/** -> integration, ...
    (inside a tier, folders mirror the packages: tests/unit/analysis/massive/test_massive.py)."""
    tests = Path(__file__).resolve().parent
    for item in items:
        parts = Path(str(item.fspath)).resolve().relative_to(tests).parts
        if len(parts) > 1 and parts[0] in ("unit", "integration", "app", "browser"):
            item.add_marker(getattr(pytest.mark, parts[0]))


@pytest.fixture(scope="session", autouse=True)
def _no_first_look_by_load():
    """A page shows the whole corpus however loaded the test machine is (a slow run would make
    the next Overview a first look); the first look's own tests set the budget back."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ISOSCOPE_FIRST_LOOK_S", "1e9")
        yield


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Never touch the user's real cache from tests."""
    path = tmp_path_factory.mktemp("isoscope-cache")
    old = os.environ.get("ISOSCOPE_CACHE_DIR")
    os.environ["ISOSCOPE_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("ISOSCOPE_CACHE_DIR", None)
    else:
        os.environ["ISOSCOPE_CACHE_DIR"] = old


def _save_tiny(tmp_path_factory, family: str, name: str, head: str = "base") -> Path:
    from isoscope.engine.load.models import build_random_model, bundled_tokenizer

    tokenizer = bundled_tokenizer()
    model = build_random_model(
        family, {"layers": 2, "width": 32, "heads": 2, "seed": 0}, len(tokenizer), head=head
    )
    folder = tmp_path_factory.mktemp(name)
    model.save_pretrained(folder)  # safetensors by default
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    """A 2-layer, width-32 random BertModel checkpoint (safetensors + tokenizer) in a temp dir."""
    return _save_tiny(tmp_path_factory, "bert", "tiny-bert")


@pytest.fixture(scope="session")
def tiny_bert_mlm_dir(tmp_path_factory) -> Path:
    """A 2-layer random BertForMaskedLM checkpoint in a temp dir."""
    return _save_tiny(tmp_path_factory, "bert", "tiny-bert-mlm", head="mlm")


@pytest.fixture(scope="session")
def tiny_gpt2_dir(tmp_path_factory) -> Path:
    """A 2-layer, width-32 random GPT2Model checkpoint in a temp dir."""
    return _save_tiny(tmp_path_factory, "gpt2", "tiny-gpt2")


@pytest.fixture(scope="session")
def minilm():
    """The bundled all-MiniLM-L6-v2 on the CPU (loaded once per session)."""
    from isoscope.engine.load.models import load_model

    return load_model("default", device="cpu")


@pytest.fixture(scope="session")
def bundled():
    from isoscope.engine.inputs.corpus import bundled_corpus

    return bundled_corpus()


@pytest.fixture(scope="session")
def minilm_result(minilm, bundled):
    """Extraction of the bundled MiniLM on the bundled corpus (shared by integration tests)."""
    from isoscope.engine.extraction import ExtractionSettings, extract

    return extract(minilm, bundled, ExtractionSettings(sample_size=4000))


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    """A 2-layer, width-32 random LlamaModel (RMSNorm, rotary, grouped KV) with the bundled
    tokenizer, saved as safetensors to a temp dir."""
    from transformers import LlamaConfig, LlamaModel

    from tests.tiny_decoders import save_tiny_decoder

    return save_tiny_decoder(tmp_path_factory, "tiny-llama", LlamaConfig, LlamaModel)


@pytest.fixture
def standin_hub(tmp_path, monkeypatch):
    """A stand-in Hugging Face Hub on 127.0.0.1 (tests/standin_hub.py) with ``HF_ENDPOINT``
    pointing at it, an empty Hugging Face cache, no token, and downloads allowed (the session is
    otherwise offline)."""
    import huggingface_hub.constants

    from tests.standin_hub import StandinHub, start

    hub = StandinHub()
    server = start(hub)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    for name in ("HF_HUB_CACHE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    yield hub
    server.shutdown()
    server.server_close()
