"""The module-scoped tiny LoadedModel the ablation runs and sweeps are measured on."""

from __future__ import annotations

import pytest

from tests.ablation_models import tiny_loaded_model


@pytest.fixture(scope="module")
def tiny_loaded():
    return tiny_loaded_model()
