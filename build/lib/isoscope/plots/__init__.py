"""Plotly figure builders. Each returns a ``plotly.graph_objects.Figure``; no Streamlit here."""
