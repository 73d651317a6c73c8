"""The families x analyses tables of the two conformance zoos, as markdown: the first zoo
(tests/zoo.py: 2-layer decoders, encoders, encoder-decoders, Whisper) and the second (tests/zoo_recent.py:
4-layer state-space, recurrent, hybrid, linear-attention, MLA, MoE and AltUp checkpoints of
2025-26). Each tiny random checkpoint is built, loaded through isoscope's loader, its layer pattern
read from its modules (the model card's line), and every in-process analysis (tests/zoo_checks.py)
plus one CLI run (``massive``) is tried: ``works``, ``refused: <the one line>``, or ``bug: ...``
(an error that is not a one-line refusal).

    .venv/bin/python benchmarks/zoo_table.py                                # both tables
    .venv/bin/python benchmarks/zoo_table.py --zoo recent                   # the second zoo only
    .venv/bin/python benchmarks/zoo_table.py --write docs/architectures.md  # replace them there

``--write`` replaces, for each zoo, what lies between the page's ``<!-- NAME zoo table -->`` and
``<!-- end NAME zoo table -->`` lines (NAME: first, recent; tests/unit/test_docs.py checks each
table against its zoo).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isoscope.engine.environment import quiet_libraries, use_offline_environment  # noqa: E402
from tests import zoo, zoo_recent  # noqa: E402
from tests.zoo_checks import ANALYSES, cli_smoke, run_analyses  # noqa: E402

ZOOS = {
    "first": (
        zoo,
        "Conformance zoo: tiny random checkpoints (2 layers, width 64) of {n} families",
    ),
    "recent": (
        zoo_recent,
        "Second zoo, the checkpoints of 2025-26: tiny random checkpoints (4 layers, width 64) of "
        "{n} families",
    ),
}


def _cell(result: str, folder: Path) -> str:
    if result == "works":
        return "works"
    kind, _, why = result.partition(": ")
    why = why.replace(f"'{folder}'", "the model").replace(str(folder), "the model")
    why = why.replace("|", "/")
    return f"{kind}: " + (why if len(why) <= 90 else why[:89] + "…")


def markers(name: str) -> tuple[str, str]:
    """The lines around zoo ``name``'s table in a docs page."""
    return f"<!-- {name} zoo table -->", f"<!-- end {name} zoo table -->"


def splice(page: str, name: str, table: list[str]) -> str:
    """``page`` with the lines between zoo ``name``'s markers replaced by ``table``."""
    start_line, end_line = markers(name)
    lines = page.splitlines()
    if start_line not in lines or end_line not in lines:
        raise SystemExit(f"error: the page has no {start_line} ... {end_line} lines to replace")
    start, end = lines.index(start_line), lines.index(end_line)
    return "\n".join(lines[: start + 1] + table + lines[end:]) + "\n"


def rows_of(module, tmp: Path) -> tuple[list[str], list[list[str]]]:
    """The header and one row per family of a zoo module (``FAMILIES``, ``build``)."""
    from isoscope.engine.arch import position_kind
    from isoscope.engine.load.models import load_model

    views = [*ANALYSES, *(["quant sites"] if "quant sites" not in ANALYSES else [])]
    header = ["family", "layer pattern", "causal", "positions", *views, "CLI massive"]
    rows = []
    for family in module.FAMILIES:
        folder = module.build(family, tmp / family)
        loaded = load_model(str(folder), device="cpu")
        results = run_analyses(loaded, bugs_as_cells=True)
        rc, line = cli_smoke(folder, tmp, audio=family in getattr(module, "AUDIO", ()))
        cli = "works" if rc == 0 else f"exit {rc}: {line.removeprefix('error: ')[:100]}"
        pattern = loaded.info.layer_pattern.partition(": ")[2] or "(layers not told apart)"
        rows.append(
            [
                family,
                pattern,
                "yes" if loaded.info.is_causal else "no",
                position_kind(loaded),
                *(_cell(results[a], folder) for a in views),
                cli,
            ]
        )
    return header, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", choices=("both", *ZOOS), default="both")
    parser.add_argument("--write", type=Path, help="a markdown page whose zoo tables to replace")
    args = parser.parse_args(argv)
    use_offline_environment()
    quiet_libraries()
    started = time.perf_counter()
    names = list(ZOOS) if args.zoo == "both" else [args.zoo]
    with tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(names):
            module, title = ZOOS[name]
            header, rows = rows_of(module, Path(tmp) / name)
            table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            table += ["| " + " | ".join(row) + " |" for row in rows]
            if args.write is not None:
                args.write.write_text(splice(args.write.read_text(), name, table))
                continue
            if i:
                print()
            print(title.format(n=len(rows)))
            print(
                "built with transformers, loaded through isoscope's loader (`benchmarks/zoo_table.py`)."
            )
            print()
            print("\n".join(table))
    sys.stderr.write(f"{', '.join(names)} zoo(s) in {time.perf_counter() - started:.0f} s\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
