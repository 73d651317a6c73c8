"""Where the Ray engine runs (isoscope.engine.extraction.ray_cluster): an unreachable address fails
in seconds with one line, bad options are refused, and the pool is sized to the cluster."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from isoscope.engine.errors import InputError
from isoscope.engine.extraction.ray_cluster import (
    RayEngineError,
    RayOptions,
    check_reachable,
    pool_size,
)


def _cluster(cpus: float, gpus: float = 0.0) -> SimpleNamespace:
    return SimpleNamespace(cluster_resources=lambda: {"CPU": cpus, "GPU": gpus})


def test_unreachable_address_exits_2_with_one_line(tmp_path, run_analyze):
    pytest.importorskip("ray")
    texts = tmp_path / "t.txt"
    texts.write_text("one text\nanother text\n")
    proc = run_analyze(
        *("--model", "random:bert:layers=2,width=32,heads=2", "--texts", str(texts)),
        *("--out", str(tmp_path / "o.json"), "--engine", "ray", "--ray-address", "127.0.0.1:1"),
        cache_dir=tmp_path / "cache",
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: cannot reach a Ray cluster at 127.0.0.1:1"
    )
    assert not (tmp_path / "o.json").exists()


def test_an_address_that_is_no_host_and_port_is_refused_before_connecting():
    with pytest.raises(RayEngineError, match="is not local, auto, HOST:PORT"):
        check_reachable("somewhere")


def test_bad_options_are_refused():
    with pytest.raises(InputError, match="--workers must be 1 or more"):
        RayOptions(workers=0)
    with pytest.raises(InputError, match="--gpus-per-worker must be 0 or more"):
        RayOptions(gpus_per_worker=-1)


def test_the_pool_fits_the_clusters_cpus_and_gpus():
    assert pool_size(_cluster(4), RayOptions()) == 4
    assert pool_size(_cluster(4), RayOptions(workers=2)) == 2
    assert pool_size(_cluster(8, 2), RayOptions(gpus_per_worker=0.5)) == 4
    with pytest.raises(RayEngineError, match="--workers 5 needs more CPUs"):
        pool_size(_cluster(4), RayOptions(workers=5))
    with pytest.raises(RayEngineError, match="fewer than --gpus-per-worker"):
        pool_size(_cluster(4, 0), RayOptions(gpus_per_worker=1))
