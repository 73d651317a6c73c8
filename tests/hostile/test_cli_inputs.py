"""The CLI against hostile or clumsy input: every row is one argument a careful attacker or a
clumsy user could give, and the CLI's answer must be exit 2 with ONE ``error:`` line on stderr
naming what was wrong, within a time limit (a FIFO or ``/dev/zero`` must not hang or fill memory)
and under a data-segment limit (the child cannot grow past it however it reads).

The rows: paths that are not regular files (a device, a FIFO, ``/proc/1``, a folder without text
files, a symlink to a device), a file over the size limit, Hub revisions that are paths
(typed, as ``random-like:`` and as Model B), and ``random:`` numbers that are not finite
integers in range, or describe a model no memory holds.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from isoscope.engine.environment import offline_env
from isoscope.engine.params import MAX_FILE_BYTES
from tests.clirun import ROOT

TIMEOUT_S = 180  # a generous bound for a loaded machine; a hang is caught, never waited out
DATA_LIMIT = 3 << 30  # the child's data segment: reading /dev/zero unbounded would pass it


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (DATA_LIMIT, DATA_LIMIT))


def run_cli(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    """``python -m isoscope ARGS`` offline, with a bounded data segment and a wall-clock limit."""
    return subprocess.run(
        [sys.executable, "-m", "isoscope", *args],
        cwd=ROOT,
        env=offline_env(ISOSCOPE_CACHE_DIR=str(cache_dir)),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        preexec_fn=_limit_memory,
    )


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory) -> dict[str, str]:
    """Paths a row names by key: made once in tmp (the FIFO and the sparse file cost nothing)."""
    root = tmp_path_factory.mktemp("hostile")
    good = root / "good.txt"
    good.write_text("Summer is warm.\nWinter is cold.\n")
    fifo = root / "pipe.txt"
    os.mkfifo(fifo)
    empty_dir = root / "empty"
    empty_dir.mkdir()
    fifo_dir = root / "fifo_only"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / "a.txt")  # named like a shard, but no file to read
    big = root / "big.txt"
    with big.open("wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)  # sparse: over the limit without the disk
    to_zero = root / "zero.txt"
    to_zero.symlink_to("/dev/zero")
    binary = root / "binary.txt"
    binary.write_bytes(b"PK\x03\x04\x00\x00" * 100)
    return {
        "good": str(good),
        "fifo": str(fifo),
        "empty_dir": str(empty_dir),
        "fifo_dir": str(fifo_dir),
        "big": str(big),
        "to_zero": str(to_zero),
        "binary": str(binary),
        "missing": str(root / "missing.txt"),
        "out": str(root / "out.json"),
        "dev_zero": "/dev/zero",
        "proc_1": "/proc/1",
    }


REVISION = "is not a branch, tag or commit"
TEXTS_ROWS = [
    ("dev_zero", "is a device"),
    ("fifo", "is a pipe"),
    ("proc_1", r"permission denied|no \.txt"),
    ("empty_dir", r"no \.txt"),
    ("fifo_dir", r"no \.txt"),
    ("big", f"the limit is {MAX_FILE_BYTES // 2**20} MiB"),
    ("to_zero", "is a device"),
    ("missing", "does not exist"),
    ("binary", "binary"),
]
MODEL_ROWS = [
    ("org/name@/etc", REVISION),
    ("org/name@/some/folder", REVISION),
    ("org/name@../../x", REVISION),
    ("org/name@..", REVISION),
    ("org/name@a b", REVISION),
    ("org/name@main\x01", REVISION),
    ("org/name@refs/../x", REVISION),
    ("org/name@" + "a" * 300, REVISION),
    ("random-like:org/name@/etc", REVISION),
    ("random:bert:layers=nan", "an integer from 1 to 64"),
    ("random:bert:layers=inf", "an integer from 1 to 64"),
    ("random:bert:layers=-1", "an integer from 1 to 64"),
    ("random:bert:layers=2.5", "an integer from 1 to 64"),
    ("random:bert:seed=1e400", "from 0 to 4,294,967,295"),
    ("random:bert:width=1e9", "from 1 to 8,192"),
    ("random:gpt2:max_positions=2000000000", "from 1 to 65,536"),
    ("random:bert:init_std=nan", "a finite number"),
    ("random:bert:layers=64,width=8192,heads=128", "does not fit"),  # in range, too big: preflight
]


def assert_one_line(proc: subprocess.CompletedProcess, phrase: str) -> None:
    """Exit 2, no traceback, and one ``error:`` line (the last) matching ``phrase``."""
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == errors[0]
    assert re.search(phrase, errors[0]), errors[0]


@pytest.mark.parametrize(("texts", "phrase"), TEXTS_ROWS, ids=[r[0] for r in TEXTS_ROWS])
def test_texts_that_are_not_a_readable_file_are_one_line(hostile_files, tmp_path, texts, phrase):
    proc = run_cli(
        "analyze",
        "--model",
        "default",
        "--texts",
        hostile_files[texts],
        "--out",
        hostile_files["out"],
        cache_dir=tmp_path,
    )
    assert_one_line(proc, phrase)


@pytest.mark.parametrize(("model", "phrase"), MODEL_ROWS, ids=[r[0][:40] for r in MODEL_ROWS])
def test_model_sources_outside_the_grammar_are_one_line(hostile_files, tmp_path, model, phrase):
    proc = run_cli(
        "analyze",
        "--model",
        model,
        "--texts",
        hostile_files["good"],
        "--out",
        hostile_files["out"],
        cache_dir=tmp_path,
    )
    assert_one_line(proc, phrase)


@pytest.mark.parametrize(
    ("flag", "source"),
    [
        ("--model-b", "org/name@/some/folder"),
        ("--model-b", "random:bert:seed=1e400"),
        ("--model-a", "random-like:org/name@.."),
    ],
)
def test_compare_checks_both_models_with_the_same_grammar(hostile_files, tmp_path, flag, source):
    other = "--model-a" if flag == "--model-b" else "--model-b"
    proc = run_cli(
        "compare",
        flag,
        source,
        other,
        "default",
        "--texts",
        hostile_files["good"],
        "--out",
        hostile_files["out"],
        cache_dir=tmp_path,
    )
    assert_one_line(proc, REVISION if "@" in source else "an integer from 0")


def test_a_one_text_corpus_says_why_anisotropy_is_blank(tmp_path):
    import json

    one = tmp_path / "one.txt"
    one.write_text("Only one text here.\n")
    out = tmp_path / "out.json"
    proc = run_cli(
        "analyze",
        "--model",
        "random:bert:layers=1,width=16,heads=2",
        "--texts",
        str(one),
        "--out",
        str(out),
        cache_dir=tmp_path / "cache",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    note = report["corpus"]["anisotropy_note"]
    assert "at least two texts" in note and "1 text" in note
    assert all(layer["anisotropy"] is None for layer in report["layers"])
    assert f"note: {note}" in proc.stderr


@pytest.mark.parametrize(
    ("argv", "path", "phrase"),
    [
        (("sts", "--model", "default", "--pairs"), "dev_zero", "is a device"),
        (("report", "--model", "default", "--texts", "{good}", "--pairs"), "fifo", "is a pipe"),
        (
            ("compare", "--model-a", "default", "--texts", "{good}", "--texts-b"),
            "fifo",
            "is a pipe",
        ),
    ],
    ids=["sts-pairs-dev-zero", "report-pairs-fifo", "compare-texts-b-fifo"],
)
def test_other_file_arguments_use_the_same_reader(hostile_files, tmp_path, argv, path, phrase):
    args = [a.format(good=hostile_files["good"]) for a in argv]
    proc = run_cli(*args, hostile_files[path], "--out", hostile_files["out"], cache_dir=tmp_path)
    assert_one_line(proc, phrase)
