"""The Streamlit front half. Where a page's code lives is decided by one rule:

- ``pages/<page>.py`` is a table of contents: the page's title, then its sections in order, each
  one call into its view. No maths, no torch, no cache keys, no widgets of its own beyond that.
- ``ui/views/<page>.py`` holds that page's body: its controls, sections, explainers and the
  page's own cached calls. A page too long for one module is a package ``ui/views/<page>/``
  instead, one module per tab (or per kind of model, ``massive/``) plus one for what they share.
  A view is used by its page only, and imports no other page's view (a module of a page package
  imports its siblings).
- ``ui/`` (this package, outside ``views``) holds only what every page shares, grouped by job:
  ``frame`` (the sidebar and its selection, the session's slots, tabs, the cache panel, the
  page's error frame), ``work`` (the one cache idiom ``cached``, which defines nothing else; the
  models, corpora and extractions every session shares; the fair queue; the cached analyses
  several pages share in ``results``), ``widgets`` (controls, the ranges a widget and a link
  accept, live charts, the token atlas), ``sharing`` (downloads, exports, links, saved
  analyses) and ``server`` (the process's start-up, its access rules, warm-ups).
- Every cached call goes through that idiom: ``@cached`` / ``@heavy`` of :mod:`isoscope.ui.work.cached`, whose
  arguments are the key. A page or view never builds a memo key by hand and never runs a
  ``isoscope.analysis`` / ``isoscope.share`` function outside such a function.

Imports point down ``pages -> isoscope.ui.views -> ui -> backend`` (tests/unit/test_architecture.py), and
``backend`` never imports streamlit.
"""
