"""The planted extraction result the report tests read (dim 7 shifted at state 2)."""

from __future__ import annotations

import pytest

from tests.report_inputs import planted_result


@pytest.fixture(scope="module")
def planted():
    return planted_result()
