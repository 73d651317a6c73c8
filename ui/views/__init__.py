"""One module per page, holding that page's body (see the rule in :mod:`ui`): ``pages/x.py`` names
the sections of ``isoscope.ui.views.x`` in order. Views import ``ui`` and ``backend``, never a page."""
