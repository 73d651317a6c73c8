"""The rotation decision on planted end metrics: written only when its 95% interval clears both
rivals', left out when they overlap, it hurts, or too few texts settle it."""

from __future__ import annotations

from isoscope.analysis.quant.rotation import rotation_decision


def _ends(rotation: tuple[float, float, float], n_texts: int = 16, widths=(64, 192)):
    """A stand-in report with per-token and SmoothQuant KL fixed and the rotation's planted."""
    from types import SimpleNamespace

    import torch

    sites = [SimpleNamespace(site=SimpleNamespace(width=w)) for w in widths]
    scan = SimpleNamespace(sites=sites, end_ids=torch.zeros(n_texts, 4))
    end = {"metric": "kl", "per_token": 0.03, "smoothquant": 0.025, "rotation": rotation[0]}
    interval = {"per_token": [0.028, 0.032], "smoothquant": [0.022, 0.027]}
    interval["rotation"] = list(rotation[1:])
    return SimpleNamespace(end=end, interval=interval, scan=scan, metric="kl")


def test_rotation_is_written_only_when_its_interval_clears_both_rivals():
    helps = rotation_decision(_ends((0.01, 0.009, 0.012)))
    assert helps.written and helps.verdict == "helps" and helps.block_size == 64
    assert "0.01 [0.009–0.012]" in helps.reason and "blocks of 64, 64" not in helps.reason
    overlapping = rotation_decision(_ends((0.02, 0.015, 0.023)))  # overlaps SmoothQuant
    assert not overlapping.written and overlapping.verdict == "not settled"
    hurts = rotation_decision(_ends((0.05, 0.045, 0.055)))
    assert not hurts.written and hurts.verdict == "hurts"
    few = rotation_decision(_ends((0.01, 0.009, 0.012), n_texts=3))
    assert not few.written and "too few" in few.reason
