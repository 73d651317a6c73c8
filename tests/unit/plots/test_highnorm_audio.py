"""The audio high-norm figures on the planted scan: the waveform and the frame norms share one time
axis, only a clip's own frames are drawn, high-norm frames are marked; the per-state table."""

from __future__ import annotations

import numpy as np

from isoscope.plots.highnorm import WAVEFORM_POINTS, audio_high_norm_frame, clip_norm_figure
from tests.unit.analysis.massive.test_highnorm_audio import planted_audio_scan


def test_clip_figure_draws_own_frames_under_the_waveform():
    scan = planted_audio_scan()
    fig = clip_norm_figure(scan, 2, 1, 2.0)
    wave, norms, high = fig.data
    assert len(wave.x) == 3 * 320 and wave.xaxis == "x" and norms.xaxis == "x2"
    assert fig.layout.xaxis.matches == "x2" or fig.layout.xaxis2.matches == "x"  # shared time
    assert list(norms.x) == [0.0, 0.02, 0.04] and list(norms.y) == [1.0, 30.0, 1.0]
    assert list(high.x) == [0.02] and list(high.y) == [30.0]
    first = clip_norm_figure(scan, 1, 1, 2.0).data[1]
    assert len(first.x) == 2  # clip 1's two frames, not the 4 columns of the array


def test_a_long_waveform_is_drawn_as_its_envelope():
    scan = planted_audio_scan()
    long = np.zeros(10 * WAVEFORM_POINTS, dtype=np.float32)
    long[12345] = 0.9  # one click: a stride would miss it, the envelope keeps it
    scan = type(scan)(**{**scan.__dict__, "waveforms": (long,) + scan.waveforms[1:]})
    wave = clip_norm_figure(scan, 0, 0, 2.0).data[0]
    assert len(wave.x) <= WAVEFORM_POINTS and max(wave.y) == np.float32(0.9)


def test_the_table_has_a_row_per_state():
    scan = planted_audio_scan()
    frame = audio_high_norm_frame(scan, scan.thresholds())
    assert frame["hidden state"].tolist() == ["emb", "1"]
    assert frame["high-norm frames"].tolist() == [0.0, round(1 / 9, 4)]
    assert frame["largest frame norm"].tolist() == [1.0, 30.0]
    assert frame["mean norm: first frame"].tolist() == [1.0, 1.0]
