"""Hostile text for the escape of visitor text (``isoscope.ui.frame.literal``), and the oracle that says
whether a Markdown string holds markup: a CommonMark renderer with raw HTML on (markdown-it-py),
plus the Streamlit extensions that CommonMark does not know."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

# Each carries "evil.example", so the test can find where it landed on the page.
PAYLOADS = [
    "[your session expired: sign in again](http://evil.example/login)",
    "![](http://evil.example/pixel.png)",
    "<img src=http://evil.example/p.png>",
    "<a href='http://evil.example'>sign in</a>",
    "<http://evil.example/auto>",
    "www.evil.example/login and https://evil.example/bare",
    ":red[**ALERT**] :material/lock: sign in at evil.example",
    "$\\href{http://evil.example}{x}$",
    "# evil.example\n- a list\n> a quote\n\n    indented code",
    "[ref link][r] evil.example\n\n[r]: http://evil.example",
    "`code` **bold** _em_ ~~strike~~ | a | b | evil.example",
    "&lt;img src=x&gt; &#x3C;b&#x3E; evil.example",
    "back\\slash \\[not a link\\](http://evil.example)",
    "mail me: admin@evil.example, or WWW.EVIL.EXAMPLE",
]
RENDERER = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
MARKUP = {"link_open", "image", "html_inline", "html_block", "heading_open", "bullet_list_open",
          "blockquote_open", "code_block", "code_inline", "strong_open", "em_open", "s_open",
          "table_open", "fence", "hr"}  # fmt: skip


# GitHub-flavoured Markdown's bare links (remark-gfm, as Streamlit renders them), found in the text
# after the escapes are resolved: an escape does not stop them.
BARE_LINK = re.compile(r"https?://|www\.|[-.+\w]+@[-\w]+(\.[-\w]+)+", re.IGNORECASE)


def markup_in(markdown: str) -> set[str]:
    """The kinds of markup CommonMark finds in ``markdown``, Streamlit's own directives, and a
    bare link GitHub-flavoured Markdown would make of the text."""
    found = set()
    for token in RENDERER.parse(markdown):
        found |= {token.type} & MARKUP
        children = token.children or ()
        found |= {child.type for child in children} & MARKUP
        text = "".join(child.content for child in children if child.type == "text")
        if BARE_LINK.search(text):
            found.add("bare link")
    bare = markdown.replace("\\\\", "")  # an escaped backslash, then what follows is live again
    for directive in (":red[", ":material/", "$\\href"):
        if directive in bare:
            found.add(directive)
    return found
