"""``add_vlines`` draws what a loop of ``fig.add_vline`` drew, in one layout update."""

from __future__ import annotations

import plotly.graph_objects as go

from isoscope.plots.lines import add_vlines

LINE = dict(color="red", width=1, dash="dot")


def test_same_lines_as_add_vline_and_keeps_existing_shapes():
    reference = go.Figure(go.Scatter(x=[0, 10], y=[0, 1]))
    ours = go.Figure(go.Scatter(x=[0, 10], y=[0, 1]))
    reference.add_hline(y=0.5)
    ours.add_hline(y=0.5)
    for x in (2, 7, 9):
        reference.add_vline(x=x, line=LINE)
    add_vlines(ours, [2, 7, 9], LINE)
    want = [(s.x0, s.x1, s.y0, s.y1, s.xref, s.yref, s.line.dash) for s in reference.layout.shapes]
    got = [(s.x0, s.x1, s.y0, s.y1, s.xref, s.yref, s.line.dash) for s in ours.layout.shapes]
    assert got == want
    assert len(got) == 4  # the hline stays


def test_labels_become_annotations_above_each_line():
    fig = add_vlines(go.Figure(), [3, 5], LINE, labels=["3", "5"])
    notes = fig.layout.annotations
    assert [(a.x, a.text, a.yref, a.y) for a in notes] == [
        (3, "3", "y domain", 1),
        (5, "5", "y domain", 1),
    ]


def test_no_positions_adds_nothing():
    fig = add_vlines(go.Figure(), [], LINE, labels=[])
    assert not fig.layout.shapes and not fig.layout.annotations
