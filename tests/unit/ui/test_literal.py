"""The one escape for visitor text: every hostile payload renders as the characters typed, and a
code span cannot be closed from inside (tests/markup_checks.py holds the payloads and the
CommonMark oracle; tests/hostile/test_shared_markup.py puts them through the app)."""

from __future__ import annotations

import html
import re

import pytest

from isoscope.ui.frame.literal import code, literal
from tests.markup_checks import PAYLOADS, RENDERER, markup_in


@pytest.mark.parametrize("payload", PAYLOADS)
def test_literal_text_renders_as_the_characters_typed(payload):
    escaped = literal(payload)
    assert markup_in(escaped) == set()
    flat = html.escape(re.sub(r"\n+", " ", payload), quote=False).replace('"', "&quot;")
    assert RENDERER.render(escaped).replace("\u200b", "") == f"<p>{flat}</p>\n"


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_code_span_cannot_be_closed_from_inside(payload):
    token = f"``{payload}`"  # backtick runs of every length inside
    rendered = RENDERER.parse(code(token))
    inline = [c for t in rendered for c in (t.children or ())]
    assert [c.type for c in inline] == ["code_inline"]
    assert inline[0].content == re.sub(r"\n+", " ", token)


@pytest.mark.parametrize(
    "bare", ["http://evil.example/a", "https://evil.example", "www.evil.example", "a@evil.example"]
)
def test_the_oracle_sees_a_bare_link_that_escapes_alone_leave(bare):
    """GitHub-flavoured Markdown links a bare URL after the escapes are resolved: escaping the
    punctuation alone still leaves a link (the zero-width space in :func:`literal` is what stops
    it), and the oracle of these tests says so."""
    escaped_only = re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", bare)
    assert "bare link" in markup_in(escaped_only)
    assert "bare link" not in markup_in(literal(bare))
