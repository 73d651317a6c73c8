"""benchmarks/extract.py's phase breakdown and CPU description on a tiny random model: the phases
are measured by wrapping the pipeline's own functions, cover its whole time and leave its result
unchanged; the CPU is named with the flags that decide its matmul kernels."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "bench_extract", ROOT / "benchmarks" / "extract.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_extract"] = module
    spec.loader.exec_module(module)
    return module


def test_the_phases_cover_the_pipeline_and_leave_it_unchanged(bench):
    from isoscope.engine.extraction import ExtractionSettings, extract, forward
    from isoscope.engine.inputs.corpus import Corpus
    from isoscope.engine.load.models import load_model

    loaded = load_model("random:bert:layers=2,width=32,heads=2,seed=3", device="cpu")
    corpus = Corpus(tuple(bench.make_texts(40)), "bench")
    settings = ExtractionSettings(batch_size=8)
    reduce_before = forward._reduce_batch
    timer = bench.Phases()
    result, total = timer.run(lambda: extract(loaded, corpus, settings))
    assert forward._reduce_batch is reduce_before  # every wrapped function is put back
    phases = timer.seconds
    assert set(phases) == {"tokenize", "forward", "gather", "statistics", "sample", "other"}
    assert phases["forward"] > 0 and phases["statistics"] > 0
    assert all(v >= -1e-6 for k, v in phases.items() if k != "other")
    assert sum(phases.values()) == pytest.approx(total)
    plain = extract(loaded, corpus, settings)
    np.testing.assert_array_equal(result.mean, plain.mean)
    np.testing.assert_array_equal(result.sample_vectors, plain.sample_vectors)


def test_the_cpu_is_named_with_its_kernels_flags(bench):
    cpu = bench.cpu_description()
    assert cpu["model"] and cpu["logical_cpus"] >= 1 and cpu["torch_threads"] >= 1
    assert set(cpu["vector_flags"]) <= {
        "avx2",
        "fma",
        "avx512f",
        "avx512_bf16",
        "avx512_vnni",
        "amx_tile",
        "amx_bf16",
    }
    assert isinstance(cpu["torch_cpu_capability"], str)
