"""Text from a visitor shown as the visitor typed it, never as markup.

Every Streamlit element that shows text (``st.markdown``, the notices ``st.info`` / ``st.warning`` /
``st.error`` / ``st.success`` / ``st.toast``, captions, titles, headers, widget, tab and expander
labels, metric labels) reads its string as Markdown, with Streamlit's own additions: ``:color[...]``
and other text directives, ``:material/icon:`` icons, ``$...$`` maths, and links and images. A
model source from a link, an uploaded file's name, a corpus line or an exception that quotes any of
them would otherwise be rendered: a link could put a clickable "sign in again" link or a tracking
image inside isoscope's own warning box.

:func:`literal` is the one escape for all of them; every site that puts such a text into one of
those elements passes it through here: :func:`message` for the backend's messages (exceptions,
notices), :func:`quoted` for a value a notice names, :func:`code` for a token or module name in a
code span. The hostile-visitor tests (``tests/hostile/``) plant markup in each input and read the
page back.
"""

from __future__ import annotations

import re

# CommonMark lets a backslash escape any ASCII punctuation character, and an escaped character is
# always shown as itself. Escaping all of them turns off every construct that starts with one:
# emphasis, code, links and images (``[`` ``!``), autolinks (``<``, and the ``:`` / ``.`` of a bare
# URL), raw HTML (``<`` ``&``), headings, lists, quotes, tables, maths (``$``) and Streamlit's
# directives and icons (``:``).
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
# Line breaks would start a new block (a heading, a list, a code block) inside a one-line notice.
_BREAKS = re.compile(r"[\r\n\t\v\f\u2028\u2029]+")
# Bare links are another matter: GitHub-flavoured Markdown (Streamlit's) finds ``http://...``,
# ``www.`` and ``name@host.tld`` in the text after the escapes are resolved, so an escape does not
# stop them. A zero-width space inside ``://``, after ``@`` and inside ``www.`` does: the text reads
# the same, but no link pattern matches it (a model source such as ``random:bert`` keeps its ``:``
# as typed, so it can be copied back into the sidebar).
_ZERO_WIDTH = "\u200b"
_LINK_STARTS = re.compile(r"(\\:(?=\\/\\/)|\\@|(?i:www)(?=\\\.))")


def literal(value: object) -> str:
    """``value`` as text that Streamlit's Markdown shows character for character (line breaks become
    spaces; a zero-width space inside ``://``, after ``@`` and inside ``www.``, which keeps bare
    links from being linked). ``literal("[a](b)")`` -> ``"\\[a\\]\\(b\\)"``."""
    escaped = _PUNCTUATION.sub(r"\\\1", _BREAKS.sub(" ", str(value)))
    return _LINK_STARTS.sub(lambda m: m.group(1) + _ZERO_WIDTH, escaped)


def message(value: object) -> str:
    """A message from the backend (an exception, a notice) as a visitor reads it: literal, and on
    a shared server with the advice only its operator can follow replaced by what the visitor can
    do (:func:`isoscope.ui.server.access.for_visitor`)."""
    from isoscope.ui.server.access import for_visitor

    return literal(for_visitor(str(value)))


def quoted(value: object) -> str:
    """``repr(value)`` made literal: how a notice names a value it could not use."""
    return literal(repr(value))


def code(value: object) -> str:
    """``value`` as an inline code span that no character of it can close: the fence is one
    backtick longer than the longest run of backticks inside (CommonMark), line breaks become
    spaces. For tokens and module names, shown in a monospace font."""
    text = _BREAKS.sub(" ", str(value))
    runs = [len(run) for run in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"
