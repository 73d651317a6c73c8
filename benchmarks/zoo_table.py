"""The families x analyses table of the conformance zoo (tests/zoo.py, tests/zoo_checks.py), as
markdown: each tiny random checkpoint is built, loaded through isoscope's loader, and every
in-process analysis plus one CLI run (``massive``) is tried.

    .venv/bin/python benchmarks/zoo_table.py   # the table in the README (Models)
"""

from __future__ import annotations

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


def main() -> int:
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
    print(f"Conformance zoo: tiny random checkpoints (2 layers, width 64) of {len(rows)} families")
    print("built with transformers, loaded through isoscope's loader (`benchmarks/zoo_table.py`).")
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    sys.stderr.write(f"{len(rows)} families in {time.perf_counter() - started:.0f} s\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
