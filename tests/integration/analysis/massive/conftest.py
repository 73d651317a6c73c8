import pytest

from isoscope.engine.load.models import load_model


@pytest.fixture()
def llama(tiny_llama_dir):
    """A fresh load per test: tests plant weights into it."""
    return load_model(str(tiny_llama_dir), device="cpu")
