"""The ``st.session_state`` slots more than one ui module reads, named once."""

from __future__ import annotations

SELECTION_KEY = (
    "isoscope_selection"  # the Selection the pages analyse (isoscope.ui.frame.sidebar writes it)
)
