"""isoscope.engine.params: one declaration per parameter, read by the settings, the commands'
options and the dashboard's widgets and links; the literature's constants carry their citation."""

from __future__ import annotations

import argparse
import json
import pickle

import pytest

from isoscope import cli
from isoscope.analysis import outliers
from isoscope.analysis.quant.params import ALPHA_GRID, KEEP_K, SMOOTHQUANT_ALPHA
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import ExtractionSettings
from isoscope.engine.params import (
    LLM_INT8_THRESHOLD,
    MASSIVE_ABS_THRESHOLD,
    MASSIVE_MEDIAN_RATIO,
    SAMPLE_SIZE,
    Cited,
    Interval,
    Options,
    massive_rule,
    percent,
)


def test_check_names_the_parameter_its_range_and_the_value():
    keep = Interval(0, 4096, 6, integer=True, name="keep", unit="channels")
    assert keep.check(4096) == 4096
    with pytest.raises(InputError, match=r"^--keep must be between 0 and 4096 channels, got 5000$"):
        keep.check(5000, keep.flag)
    with pytest.raises(InputError, match=r"^sample size must be between 2 and 1,000,000 tokens"):
        SAMPLE_SIZE.check(1)
    with pytest.raises(InputError, match=r"between 0.05 and 1, got 0"):
        outliers.EXTREME_SHARE.check(0)


def test_parse_keeps_a_link_value_inside_the_range():
    seed = Interval(0, 10_000, 0, integer=True)
    assert seed.parse("42") == 42 and isinstance(seed.parse("42"), int)
    for bad in ("-1", "10001", "4.5", "x"):
        with pytest.raises(ValueError):
            seed.parse(bad)
    quantile = outliers.QUANTILE
    assert quantile.parse("0.9990000000000001") == 0.999  # a slider's step arithmetic
    with pytest.raises(ValueError):
        quantile.parse("0.9991")
    with pytest.raises(ValueError, match="outside"):
        Interval(1.0, 8.0, 9.0)
    lengths = Options((16, 32, 64), 32)
    assert lengths.parse("64") == 64 and lengths.index == 1 and Options(("a", "b")).index == 0
    with pytest.raises(ValueError):
        lengths.parse("48")
    with pytest.raises(ValueError, match="not one of"):
        Options(("a",), "b")


def test_add_argument_gives_the_flag_its_type_default_and_help():
    parser = argparse.ArgumentParser()
    SAMPLE_SIZE.add_argument(parser, help="token vectors kept for CKA")
    SMOOTHQUANT_ALPHA.add_argument(parser)
    args = parser.parse_args([])
    assert args.sample_size == 8000 and args.alpha == 0.5
    assert parser.parse_args(["--sample-size", "12"]).sample_size == 12
    helps = {a.dest: a.help for a in parser._actions}
    assert helps["sample_size"] == "token vectors kept for CKA"
    assert helps["alpha"] == SMOOTHQUANT_ALPHA.help


def test_every_command_reads_the_sample_size_and_keep_k_from_their_declarations():
    parser = cli.build_parser()
    commands = parser._subparsers._group_actions[0].choices
    with_sample = {
        name: {a.dest: a.default for a in sub._actions}["sample_size"]
        for name, sub in commands.items()
        if any(a.dest == "sample_size" for a in sub._actions)
    }
    assert len(with_sample) >= 6 and set(with_sample.values()) == {SAMPLE_SIZE.default}
    quant = {a.dest: a.default for a in commands["quant"]._actions}
    # --alpha defaults to the sweep's choice (None); the declared α is where the sweep starts
    assert quant["keep"] == KEEP_K.default and quant["alpha"] is None
    assert SMOOTHQUANT_ALPHA.default in ALPHA_GRID
    assert ExtractionSettings().sample_size == SAMPLE_SIZE.default


def test_the_outlier_thresholds_default_to_their_declarations():
    t = outliers.OutlierThresholds()
    assert (t.extreme_share, t.zscore_k, t.quantile, t.variance_factor) == (
        outliers.EXTREME_SHARE.default,
        outliers.ZSCORE_K.default,
        outliers.QUANTILE.default,
        outliers.VARIANCE_FACTOR.default,
    )
    assert "Luo" in outliers.EXTREME_SHARE.citation


def test_a_cited_constant_is_its_number_and_says_whose_it_is():
    assert LLM_INT8_THRESHOLD == 6.0 and "Dettmers" in LLM_INT8_THRESHOLD.citation
    assert f"{LLM_INT8_THRESHOLD:g}" == "6" and json.dumps(LLM_INT8_THRESHOLD) == "6.0"
    copy = pickle.loads(pickle.dumps(MASSIVE_MEDIAN_RATIO))
    assert (
        isinstance(copy, Cited)
        and copy == 1000.0
        and copy.citation == MASSIVE_MEDIAN_RATIO.citation
    )
    assert "Sun" in MASSIVE_ABS_THRESHOLD.citation
    assert massive_rule() == "|h| > 100 and > 1000 × the median"
    assert massive_rule("x") == "|h| > 100 and > 1000 x the median"


def test_choices_are_what_a_page_offers_and_a_link_may_carry():
    lengths = Interval(2, 8192, 64, integer=True, name="max_length", choices=(16, 64, 256))
    assert lengths.parse("256") == 256
    with pytest.raises(ValueError):
        lengths.parse("128")  # inside the range, but not a choice the page offers
    lengths.check(128)  # a command takes any value in the range
    with pytest.raises(ValueError, match="must hold the default"):
        Interval(2, 8192, 128, integer=True, choices=(16, 64))
    with pytest.raises(ValueError, match="must hold the default"):
        Interval(2, 100, 64, integer=True, choices=(64, 256))  # a choice outside the range


def test_an_option_built_from_a_declaration_keeps_it():
    parser = argparse.ArgumentParser()
    SAMPLE_SIZE.add_argument(parser)
    action = next(a for a in parser._actions if a.dest == "sample_size")
    assert action.declaration is SAMPLE_SIZE


def test_percent_writes_a_share_as_the_sentences_do():
    assert percent(0.06) == "6 %" and percent(0.25) == "25 %" and percent(0.125) == "12.5 %"
