"""Where the growth of the rate with size comes from at a size the device has not run: its own
records when they span the sizes, else a calibration of the model's shape (kept, once per shape
and device), never the prior alone while a calibration can run; and the announcement says which
(backend/engine/budget/estimates.py, throughput.py, time_estimate.py; synthetic records, the
calibration faked)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from isoscope.engine.budget import throughput, time_estimate
from isoscope.engine.budget.calibration import Shape, shape_key, slice_config
from isoscope.engine.inputs.corpus import Corpus


@pytest.fixture(autouse=True)
def small_cache(monkeypatch):
    """A machine with a 40 MB last-level cache (every record here is beyond its knee) and no
    fixed extraction cost."""
    monkeypatch.setattr(throughput, "cache_knee", lambda device: 10**7)
    monkeypatch.setattr(throughput, "EXTRACTION_FIXED_S", 0.0)


TARGET = 600_000_000  # a model 4-5x larger than the bundled decoder
BUNDLED = {23_000_000: 9e-12, 135_000_000: 7e-12}  # an encoder and a decoder: 6x apart


def shape(width: int = 896, layers: int = 24) -> Shape:
    config = SimpleNamespace(
        model_type="qwen2",
        hidden_size=width,
        num_hidden_layers=layers,
        intermediate_size=4 * width,
        num_attention_heads=14,
        num_key_value_heads=2,
    )
    return Shape(config, layers, width)


class FakeCalibration:
    """A calibration that answers ``seconds`` per padded token and counts its calls."""

    def __init__(self, seconds: float | None = 2e-3) -> None:
        self.seconds = seconds
        self.calls: list[Shape] = []

    def __call__(self, measured: Shape) -> float | None:
        self.calls.append(measured)
        return self.seconds


def keep(root, device: str, records: dict[int, float]) -> None:
    for parameters, rate in records.items():
        throughput.record(root, device, parameters, 10**6, rate * parameters * 10**6, 0.0)


@pytest.mark.parametrize(
    "records",
    [
        {10**8: 1e-11, 3 * 10**8: 1.2e-11, 10**9 + 10**8: 1.5e-11},  # a decade and more
        {2 * 10**8: 1e-11, 2 * 10**9: 2e-11},  # two records a decade apart
        {10**8: 1e-11, 5 * 10**8: 1e-11, 10**9: 1e-11, 2 * 10**9: 1.1e-11},  # flat
    ],
)
def test_records_spanning_the_sizes_give_the_growth_and_no_calibration_runs(tmp_path, records):
    keep(tmp_path, "cpu", records)
    fake = FakeCalibration()
    rate = throughput.extraction_rate(tmp_path, "cpu", 8 * 10**9, shape(), fake)
    assert fake.calls == []
    assert rate.basis.startswith(f"from this machine's records of {len(records)} models")


@pytest.mark.parametrize(
    "records",
    [
        BUNDLED,  # the bundled encoder and decoder only
        {135_000_000: 7e-12},  # one model
        {2 * 10**8: 1e-11, 6 * 10**8: 3e-11},  # close sizes: a slope one slow run can double
    ],
)
def test_records_too_close_in_size_are_extrapolated_by_a_calibration(tmp_path, records):
    keep(tmp_path, "cpu", records)
    fake = FakeCalibration(seconds=1.2e-3)
    size = 4 * max(records)
    rate = throughput.extraction_rate(tmp_path, "cpu", size, shape(), fake)
    assert len(fake.calls) == 1 and fake.calls[0].key == shape().key
    assert rate.per_unit == pytest.approx(1.2e-3 / size)
    assert rate.basis == "from a 2-layer calibration at the model's width"


def test_a_calibration_runs_once_per_shape_and_device(tmp_path):
    keep(tmp_path, "cpu", BUNDLED)
    keep(tmp_path, "cuda:X", BUNDLED)
    fake = FakeCalibration()
    first = throughput.extraction_rate(tmp_path, "cpu", TARGET, shape(), fake)
    again = throughput.extraction_rate(tmp_path, "cpu", TARGET, shape(), fake)
    assert len(fake.calls) == 1 and again == first  # kept in the speed record
    # after the load, without a calibration to run, the estimate finds the kept one
    assert throughput.seconds_per_token_parameter(tmp_path, "cpu", TARGET, shape()) == (
        first.per_unit
    )
    throughput.extraction_rate(tmp_path, "cpu", TARGET, shape(width=1024), fake)
    throughput.extraction_rate(tmp_path, "cuda:X", TARGET, shape(), fake)
    assert len(fake.calls) == 3  # another shape, another device: measured


def test_the_prior_stands_only_where_no_calibration_can_run(tmp_path):
    keep(tmp_path, "cpu", BUNDLED)
    failed = FakeCalibration(seconds=None)
    rate = throughput.extraction_rate(tmp_path, "cpu", TARGET, shape(), failed)
    assert len(failed.calls) == 1 and rate.basis.startswith("from 2 smaller models")
    unknown = throughput.extraction_rate(tmp_path, "cpu", TARGET)  # no shape: no calibration
    assert unknown.per_unit == rate.per_unit


@pytest.mark.parametrize("size", [23_000_000, 80_000_000, 135_000_000, 150_000_000, 10_000_000])
def test_sizes_the_records_cover_need_no_calibration(tmp_path, size):
    keep(tmp_path, "cpu", BUNDLED)
    fake = FakeCalibration()
    assert throughput.extraction_rate(tmp_path, "cpu", size, shape(), fake) is not None
    assert fake.calls == []


def test_a_device_with_no_record_measures_its_first_batch_without_a_calibration(tmp_path):
    fake = FakeCalibration(seconds=5e-3)
    assert throughput.extraction_rate(tmp_path, "cpu", TARGET, shape(), fake) is None
    assert fake.calls == []  # the default model's first page waits for no calibration


class Tokenizer:  # one token per word
    def __call__(self, texts, truncation, max_length):
        return {"input_ids": [t.split()[:max_length] for t in texts]}


@pytest.mark.parametrize(
    ("records", "says"),
    [
        (BUNDLED, "extraction speed from a 2-layer calibration at the model's width"),
        (
            {10**8: 1e-11, 3 * 10**8: 1e-11, 10**9: 1e-11, 2 * 10**9: 1e-11},
            "extraction speed from this machine's records of 4 models",
        ),
    ],
)
def test_the_announcement_says_where_the_extraction_speed_came_from(tmp_path, records, says):
    keep(tmp_path, "cpu", records)
    corpus = Corpus(("a b c", "d e f g h", "i j"), "three")
    lengths: list[tuple[int, int]] = []

    def calibrate(measured: Shape, length: int, texts: int) -> float:
        lengths.append((length, texts))
        return 1e-3

    estimate = time_estimate.estimate_first_page(
        tmp_path, "cpu", 8 * 10**9, Tokenizer(), corpus, 8, None, (), shape(), calibrate
    )
    assert says in estimate.describe()
    assert lengths in ([], [(5, 3)])  # the corpus's batch: 3 texts padded to 5 tokens
    assert estimate.shares[0] == 0.0 and estimate.shares[-1] == pytest.approx(1.0)


def test_the_calibrations_model_is_the_shape_cut_to_two_layers_and_a_small_vocabulary():
    from transformers import Qwen2Config

    config = Qwen2Config(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=151936,
        bos_token_id=151643,
    )
    config.layer_types = ["full_attention"] * 6  # a per-layer list is cut with the layers
    cut = slice_config(Shape(config, 6, 64))
    assert cut.num_hidden_layers == 2 and cut.layer_types == ["full_attention"] * 2
    assert cut.vocab_size == 512 and cut.bos_token_id == 0 and cut.hidden_size == 64
    assert config.num_hidden_layers == 6  # the model's own config is left as it is
    assert shape_key(config) == "qwen2 · width 64 · depth 6 · ffn 128 · heads 4/2"


@pytest.mark.parametrize(
    ("width", "layers", "runs"),
    [
        (384, 6, 2),
        (896, 24, 2),
        (1536, 28, 2),
        (2048, 16, 1),
        (3584, 28, 1),
        (5120, 40, 1),
        (8192, 80, 0),
    ],
)
def test_a_wide_model_runs_fewer_layers_and_the_widest_none(width, layers, runs):
    measured = shape(width, layers)
    assert measured.run_layers == runs
    if runs:
        assert measured.basis == f"from a {runs}-layer calibration at the model's width"
