"""The families x analyses table of the conformance zoo (tests/zoo.py, tests/zoo_checks.py), as
markdown: each tiny random checkpoint is built, loaded through isoscope's loader, and every
in-process analysis plus one CLI run (``massive``) is tried.

    .venv/bin/python benchmarks/zoo_table.py                                # print it
    .venv/bin/python benchmarks/zoo_table.py --write docs/architectures.md  # replace the table there

``--write`` replaces what lies between the page's ``<!-- zoo table -->`` and
``<!-- end zoo table -->`` lines (tests/unit/test_docs.py checks the table against the zoo).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.engine.environment import quiet_libraries, use_offline_environment  # noqa: E402
from tests import zoo  # noqa: E402
from tests.zoo_checks import ANALYSES, cli_smoke, run_analyses  # noqa: E402


def _cell(result: str, folder: Path) -> str:
    if result == "works":
        return "works"
    why = result.removeprefix("refused: ").replace(f"'{folder}'", "the model")
    why = why.replace(str(folder), "the model").replace("|", "/")
    return "refused: " + (why if len(why) <= 90 else why[:89] + "…")


START, END = "<!-- zoo table -->", "<!-- end zoo table -->"


def splice(page: str, table: list[str]) -> str:
    """``page`` with the lines between its START and END markers replaced by ``table``."""
    lines = page.splitlines()
    if START not in lines or END not in lines:
        raise SystemExit(f"error: the page has no {START} ... {END} lines to replace")
    start, end = lines.index(START), lines.index(END)
    return "\n".join(lines[: start + 1] + table + lines[end:]) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="a markdown page whose zoo table to replace")
    args = parser.parse_args()
    use_offline_environment()
    quiet_libraries()
    from backend.engine.arch import position_kind
    from backend.engine.models import load_model

    started = time.perf_counter()
    header = ["family", "causal", "positions", *ANALYSES, "CLI massive"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for family in zoo.FAMILIES:
            folder = zoo.build(family, Path(tmp) / family)
            loaded = load_model(str(folder), device="cpu")
            results = run_analyses(loaded)
            rc, line = cli_smoke(folder, Path(tmp), audio=family in zoo.AUDIO)
            cli = "works" if rc == 0 else f"exit {rc}: {line.removeprefix('error: ')[:100]}"
            rows.append(
                [
                    family,
                    "yes" if loaded.info.is_causal else "no",
                    position_kind(loaded),
                    *(_cell(results[a], folder) for a in ANALYSES),
                    cli,
                ]
            )
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    table += ["| " + " | ".join(row) + " |" for row in rows]
    if args.write is not None:
        args.write.write_text(splice(args.write.read_text(), table))
    else:
        print(
            f"Conformance zoo: tiny random checkpoints (2 layers, width 64) of {len(rows)} families"
        )
        print(
            "built with transformers, loaded through isoscope's loader (`benchmarks/zoo_table.py`)."
        )
        print()
        print("\n".join(table))
    sys.stderr.write(f"{len(rows)} families in {time.perf_counter() - started:.0f} s\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
