"""The one escape for visitor text: every hostile payload renders as the characters typed, and a
code span cannot be closed from inside (tests/markup_checks.py holds the payloads and the
CommonMark oracle; tests/hostile/test_shared_markup.py puts them through the app)."""

from __future__ import annotations

import html
import re

import pytest

from tests.markup_checks import PAYLOADS, RENDERER, markup_in
from ui.frame.literal import code, literal


@pytest.mark.parametrize("payload", PAYLOADS)
def test_literal_text_renders_as_the_characters_typed(payload):
    escaped = literal(payload)
    assert markup_in(escaped) == set()
    flat = html.escape(re.sub(r"\n+", " ", payload), quote=False).replace('"', "&quot;")
    assert RENDERER.render(escaped) == f"<p>{flat}</p>\n"


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_code_span_cannot_be_closed_from_inside(payload):
    token = f"``{payload}`"  # backtick runs of every length inside
    rendered = RENDERER.parse(code(token))
    inline = [c for t in rendered for c in (t.children or ())]
    assert [c.type for c in inline] == ["code_inline"]
    assert inline[0].content == re.sub(r"\n+", " ", token)
