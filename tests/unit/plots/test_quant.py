"""Figure builders of the quantization page on a synthetic report: the heat strip has one cell per
(role, block), the token x channel view draws the pooled tiles, the scheme and sensitivity figures
carry every scheme and block."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.quant.readiness import MagnitudeTiles, QuantReport, QuantScan, SiteScan
from isoscope.analysis.quant.schemes import SCHEMES
from isoscope.analysis.quant.sites import ROLES, Site, SiteMap
from isoscope.plots.quant import (
    STRIP_QUANTITIES,
    before_after_frame,
    channel_figure,
    heat_strip_figure,
    magnitude_figure,
    moved_figure,
    prefix_figure,
    scheme_figure,
    scheme_frame,
    sensitivity_figure,
    sites_frame,
)

LAYERS, D = 3, 8


def _report(metric: str = "kl") -> QuantReport:
    sites, errors = [], []
    for layer in range(LAYERS):
        for k, role in enumerate(ROLES):
            site = Site(layer, role, (f"m.{layer}.{role}",), (f"{layer}.{role}",), D, k % 2 == 0)
            act_max = torch.arange(1, D + 1, dtype=torch.float32) * (layer + 1)
            sites.append(
                SiteScan(
                    site,
                    act_max,
                    float(act_max.max()),
                    0.5,
                    3.0 + layer,
                    0.01,
                    100,
                    torch.zeros(4, D),
                )
            )
            errors.append({s: 0.01 * (i + 1) * (layer + 1) for i, s in enumerate(SCHEMES)})
    scan = QuantScan(
        site_map=SiteMap(tuple(s.site for s in sites), "layers", LAYERS),
        sites=sites,
        n_texts=2,
        n_tokens=20,
        max_length=16,
        error_tokens=4,
        sample_weights=torch.full((4,), 5.0, dtype=torch.float64),
        end_ids=torch.zeros(2, 5, dtype=torch.long),
        end_mask=torch.ones(2, 5, dtype=torch.bool),
        end_reference=torch.zeros(2, 5, D),
        massive_dims=(7,),
        hidden_size=D,
        is_causal=metric == "kl",
        seconds=1.0,
    )
    base = 0.0 if metric == "kl" else 1.0
    sign = 1 if metric == "kl" else -1
    end = {"metric": metric, "full_precision": base}
    end.update({s: base + sign * 0.01 * (i + 1) for i, s in enumerate(SCHEMES)})
    sens = [{"layer": i, "end": base + sign * 0.001 * (i + 1)} for i in range(LAYERS)]
    return QuantReport(scan, errors, end, sens, 6, 0.5)


@pytest.mark.parametrize("quantity", list(STRIP_QUANTITIES))
def test_heat_strip_has_a_cell_per_role_and_block(quantity):
    fig = heat_strip_figure(_report(), quantity)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (len(ROLES), LAYERS) and np.isfinite(z).all()


def test_heat_strip_uses_log_colour_for_ratios():
    fig = heat_strip_figure(_report(), "kurtosis")
    assert np.asarray(fig.data[0].z)[0, 2] == pytest.approx(np.log10(5.0))


def test_magnitude_figure_draws_the_tiles():
    tiles = MagnitudeTiles("m.0.q", np.full((10, 4), 2.0, dtype=np.float32), 3, 2, 30, 8)
    fig = magnitude_figure(tiles)
    assert np.asarray(fig.data[0].z).shape == (10, 4)
    assert list(fig.data[0].x) == [0, 2, 4, 6] and list(fig.data[0].y)[1] == 3


@pytest.mark.parametrize("metric", ["kl", "cosine"])
def test_scheme_and_sensitivity_figures(metric):
    report = _report(metric)
    fig = scheme_figure(report)
    assert len(fig.data) == 2 and len(fig.data[0].x) == len(SCHEMES)
    assert all(v > 0 for v in fig.data[0].y)  # KL as is, 1 - cosine for encoders
    sens = sensitivity_figure(report)
    assert list(sens.data[0].x) == list(range(LAYERS))
    assert "Spearman" in sens.layout.title.text
    assert len(scheme_frame(report)) == len(SCHEMES)
    assert len(sites_frame(report)) == LAYERS * len(ROLES)


def test_report_json_and_verdict():
    report = _report()
    data = report.to_dict()
    assert data["spearman_error_vs_end"] == pytest.approx(1.0)
    assert data["sites"][0]["massive_overlap"] == [7]
    assert "Per-token W8A8 costs KL" in data["verdict"] and "Spearman 1.00" in data["verdict"]


def test_moved_figure_draws_both_sides_before_and_after():
    from isoscope.analysis.quant.before_after import SideStats

    report = _report()
    n = len(report.scan.sites)
    stats = [
        {
            stage: SideStats(2.0, 3.0, 0.0, act + 0.001 * i, 1.5, weight + 0.001 * i)
            for stage, act, weight in (
                ("before", 0.2, 0.01),
                ("smoothquant", 0.05, 0.03),
                ("rotation", 0.04, 0.02),
            )
        }
        for i in range(n)
    ]
    fig = moved_figure(report, stats)
    assert len(fig.data) == 4 and all(len(t.x) == n for t in fig.data)
    act_after = next(t for t in fig.data if t.name.startswith("activation") and "after" in t.name)
    assert act_after.y[3] == pytest.approx(0.053)
    assert fig.layout.yaxis.type == "log"
    frame = before_after_frame(report, stats)
    assert len(frame) == 3 * n and set(frame["stage"]) == {
        "before",
        "SmoothQuant",
        "Hadamard rotation",
    }


@pytest.mark.parametrize("transform", ["smoothquant", "rotation"])
def test_channel_figure_draws_each_side_before_and_after_per_channel(transform):
    from isoscope.analysis.quant.before_after import ChannelProfile

    rng = np.random.default_rng(0)
    act, weight = rng.uniform(0.1, 1, size=(2, D))
    act[3] = 50.0  # a planted outlier channel
    profile = ChannelProfile(
        "model.layers.0.self_attn.q_proj", transform, 0.6, act, act / 5, weight, weight * 5
    )
    fig = channel_figure(profile)
    assert len(fig.data) == 4 and all(len(t.x) == D for t in fig.data)
    names = [t.name for t in fig.data]
    assert names[0] == "activation, before" and names[2] == "weight, before"
    assert names[1].startswith("activation, after") and names[3].startswith("weight, after")
    assert ("α = 0.6" in names[1]) == (transform == "smoothquant")
    assert fig.data[0].y[3] == 50.0 and fig.data[1].y[3] == pytest.approx(10.0)
    assert fig.data[3].y[3] == pytest.approx(weight[3] * 5)
    assert fig.data[2].yaxis != fig.data[0].yaxis  # activations and weights in their own panels
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis2.type == "log"


@pytest.mark.parametrize("metric", ["kl", "cosine"])
def test_prefix_figure_draws_the_curve_and_the_running_sum(metric):
    report = _report(metric)
    base = 0.0 if metric == "kl" else 1.0
    sign = 1 if metric == "kl" else -1
    curve = [{"layers": k, "end": base + sign * 0.002 * k} for k in range(1, LAYERS + 1)]
    fig = prefix_figure(report, curve)
    assert list(fig.data[0].x) == [1, 2, 3]
    assert list(fig.data[0].y) == pytest.approx([0.002, 0.004, 0.006])
    assert list(fig.data[1].y) == pytest.approx([0.001, 0.003, 0.006])  # 0.001 * (1, 1+2, 1+2+3)


def test_verdict_says_when_intervals_overlap_or_rest_on_too_few_texts():
    from dataclasses import replace

    report = _report()  # 2 end texts
    wide = {k: [0.0, 1.0] for k in SCHEMES}
    assert "too few" in replace(report, interval=wide).verdict()
    more = replace(report.scan, end_ids=torch.zeros(8, 5, dtype=torch.long))
    verdict = replace(report, scan=more, interval=wide).verdict()
    assert "overlaps" in verdict and "too few" not in verdict
    apart = {k: [0.01 * (i + 1) - 0.001, 0.01 * (i + 1) + 0.001] for i, k in enumerate(SCHEMES)}
    assert "overlaps" not in replace(report, scan=more, interval=apart).verdict()
