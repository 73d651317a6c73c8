"""Downloads every view offers beside a chart or table: PNG of the figure, CSV of the table and
strict JSON, the same JSON the CLI writes.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from isoscope.engine.jsonio import strict_json


def json_payload(value: Any) -> str:
    """The text of every JSON download: :func:`isoscope.engine.jsonio.strict_json` (numpy to Python,
    NaN / inf to null), the same as the CLI's JSON files."""
    return strict_json(value, indent=1)


def download_buttons(
    key: str,
    *,
    fig: go.Figure | None = None,
    frame: pd.DataFrame | None = None,
    json_data: Any = None,
    name: str = "isoscope",
) -> None:
    """PNG of a Plotly figure (rendered by kaleido only when clicked), CSV of a DataFrame, and
    ``json_data`` as strict JSON (:func:`json_payload`: NaN and inf written as null, as the CLI does)."""
    cols = st.columns(3)
    if fig is not None:
        cols[0].download_button(
            "PNG",
            data=lambda: fig.to_image(format="png", scale=2),
            file_name=f"{name}.png",
            mime="image/png",
            key=f"dl_png_{key}",
            on_click="ignore",
            icon=":material/image:",
        )
    if frame is not None:
        cols[1].download_button(
            "CSV",
            data=lambda: frame.to_csv(index=False),
            file_name=f"{name}.csv",
            mime="text/csv",
            key=f"dl_csv_{key}",
            on_click="ignore",
            icon=":material/table:",
        )
    if json_data is not None:
        cols[2].download_button(
            "JSON",
            data=json_payload(json_data),
            file_name=f"{name}.json",
            mime="application/json",
            key=f"dl_json_{key}",
            on_click="ignore",
            icon=":material/data_object:",
        )
