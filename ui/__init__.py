"""The Streamlit front half. Where a page's code lives is decided by one rule:

- ``pages/<page>.py`` is a table of contents: the page's title, then its sections in order, each
  one call into its view. No maths, no torch, no cache keys, no widgets of its own beyond that.
- ``ui/views/<page>.py`` holds that page's body: its controls, sections, explainers and the
  page's own cached calls. A page too long for one module is a package ``ui/views/<page>/``
  instead, one module per tab plus one for what its tabs share. A view is used by its page
  only, and imports no other page's view (a module of a page package imports its siblings).
- ``ui/`` (this package, outside ``views``) holds only what every page shares: the frame's
  sidebar and session (``common``, ``sidebar``, ``session``, ``saved``), the server and its access
  rules (``server``, ``access``, ``prewarm``, ``warmup``), links and widget ranges (``links``,
  ``ranges``, ``controls``, ``tabs``, ``charts``, ``inputs``), downloads and sharing (``share``,
  ``cache_panel``), the one cache idiom (``cached``, which defines nothing else) and the cached
  analyses that several pages share (``results``).
- Every cached call goes through that idiom: ``@cached`` / ``@heavy`` of :mod:`ui.cached`, whose
  arguments are the key. A page or view never builds a memo key by hand and never runs a
  ``backend.analysis`` / ``backend.share`` function outside such a function.

Imports point down ``pages -> ui.views -> ui -> backend`` (tests/unit/test_architecture.py), and
``backend`` never imports streamlit.
"""
