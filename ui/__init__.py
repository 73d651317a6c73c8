"""Streamlit glue shared by every page: the selection, cached loaders, downloads, explainers.

Pages import from here and from ``backend``; they hold no maths and no torch.
"""
