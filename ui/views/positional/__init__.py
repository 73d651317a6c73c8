"""The Positional information page's body (pages/positional.py), one module per tab: position
embeddings (``table``), position probe (``probe``), TUPE decomposition (``tupe``), variance lab
(``variance``) and queries & keys (``queries_keys``); image models' patch grid views in ``grid``,
and what the tabs share in ``shared``. Each tab runs only while it is open (lazy tabs); the
arithmetic lives in isoscope.analysis.positional."""

from __future__ import annotations

from isoscope.ui.views.positional.probe import probe_tab
from isoscope.ui.views.positional.queries_keys import queries_keys_tab
from isoscope.ui.views.positional.table import position_embeddings_tab
from isoscope.ui.views.positional.tupe import tupe_tab
from isoscope.ui.views.positional.variance import variance_lab_tab

TABS = [
    "Position embeddings",
    "Position probe",
    "TUPE decomposition",
    "Variance lab (NoPE)",
    "Queries & keys",
]

# one view per label of TABS, in the same order
TAB_VIEWS = (position_embeddings_tab, probe_tab, tupe_tab, variance_lab_tab, queries_keys_tab)
