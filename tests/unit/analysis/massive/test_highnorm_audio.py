"""High-norm frames of speech encoders on planted frame norms: the threshold, the share and the
top frames count each clip's own frames only (NaN past a clip's end, where Whisper's padding is)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.massive.highnorm import AUDIO_CARRIERS, AudioScan, frame_kind
from isoscope.analysis.massive.massive import MassiveAccumulator
from isoscope.engine.errors import InputError

FRAMES = (4, 2, 3)  # three clips' own frames


def planted_audio_scan() -> AudioScan:
    """2 states, 3 clips of 4, 2 and 3 frames (20 ms each); every own frame has norm 1 except
    clip 2's frame 1 (norm 30) at state 1. Past a clip's end: NaN."""
    norms = np.full((2, 3, 4), np.nan, dtype=np.float32)
    for clip, n in enumerate(FRAMES):
        norms[:, clip, :n] = 1.0
    norms[1, 2, 1] = 30.0
    stats = MassiveAccumulator(2, torch.device("cpu")).finish(
        ["emb", "1"], lambda ids: [f"t={i * 0.02:.2f}s" for i in ids], frame_kind, AUDIO_CARRIERS
    )
    waves = tuple(np.sin(np.arange(n * 320) / 10.0).astype(np.float32) for n in FRAMES)
    return AudioScan(stats, norms, np.array(FRAMES), 0.02, 16000, waves, seconds=0.0)


def test_frame_kinds():
    assert [frame_kind(p) for p in (0, 1, 7)] == ["first frame", "other frame", "other frame"]


def test_threshold_share_and_top_frames_use_own_frames_only():
    scan = planted_audio_scan()
    thresholds = scan.thresholds(2.0)
    np.testing.assert_allclose(thresholds, [2.0, 2.0])  # 2 x the median own-frame norm (1)
    # 1 of the 9 own frames, not 1 of the 12 columns of the (clips, T) array
    np.testing.assert_allclose(scan.high_norm_share(thresholds), [0.0, 1 / sum(FRAMES)])
    assert scan.top_frames(1, 2.0) == [{"clip": 2, "frame": 1, "time": 0.02, "norm": 30.0}]
    assert scan.top_frames(0, 2.0) == []
    np.testing.assert_allclose(scan.frame_times(0), [0.0, 0.02, 0.04, 0.06])
    with pytest.raises(InputError, match="above 1"):
        scan.thresholds(0.5)
