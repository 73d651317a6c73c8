"""The charts a page drew, read from AppTest's element tree: Streamlit's own (``plotly_chart``)
and live charts (:func:`isoscope.ui.widgets.charts.live_chart`, a component whose JSON arguments carry the
figure; AppTest shows it as an unknown ``component_instance``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from streamlit.testing.v1 import AppTest

LIVE = "isoscope.ui.widgets.charts.live_chart"
_KEYED_ID = re.compile(r"^\$\$ID-[0-9a-f]+-(?P<key>.+)$")


@dataclass(frozen=True)
class Chart:
    key: str  # the key the page gave
    id: str  # Streamlit's element id (ends with the key)
    spec: str  # the figure as Plotly JSON
    live: bool

    @property
    def figure(self) -> dict:
        return json.loads(self.spec)


def _key(element_id: str) -> str:
    match = _KEYED_ID.match(element_id)
    return match["key"] if match else ""


def _leaves(node):
    """Elements under ``node`` in page order."""
    children = getattr(node, "children", None)
    if not children:
        yield node
        return
    for index in sorted(children):
        yield from _leaves(children[index])


def charts(at: AppTest) -> list[Chart]:
    """Every chart on the page (Streamlit's own and live charts), in page order."""
    out = []
    for el in _leaves(at.main):  # charts are drawn in the main area only
        if el.type == "plotly_chart":
            out.append(Chart(key=_key(el.proto.id), id=el.proto.id, spec=el.proto.spec, live=False))
        elif el.type == "component_instance" and el.proto.component_name == LIVE:
            args = json.loads(el.proto.json_args)
            out.append(Chart(key=_key(el.proto.id), id=el.proto.id, spec=args["spec"], live=True))
    return out
