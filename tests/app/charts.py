"""The charts a page drew, read from AppTest's element tree: Streamlit's own (``plotly_chart``)
and live charts (:func:`ui.charts.live_chart`, a component whose JSON arguments carry the
figure; AppTest shows it as an unknown ``component_instance``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from streamlit.testing.v1 import AppTest

LIVE = "ui.charts.live_chart"
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


def charts(at: AppTest) -> list[Chart]:
    """Every chart on the page: Streamlit's own first, then live charts, each in page order."""
    out = [
        Chart(key=_key(el.proto.id), id=el.proto.id, spec=el.proto.spec, live=False)
        for el in at.get("plotly_chart")
    ]
    for el in at.get("component_instance"):
        if el.proto.component_name == LIVE:
            args = json.loads(el.proto.json_args)
            out.append(Chart(key=_key(el.proto.id), id=el.proto.id, spec=args["spec"], live=True))
    return out
