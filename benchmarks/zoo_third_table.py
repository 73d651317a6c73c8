"""The table of the third zoo (tests/zoo_third.py: text families neither other zoo holds), as
markdown: each tiny random checkpoint built, loaded through isoscope's loader and tried through
every check of ``tests.zoo_third.outcomes`` (the causal flag against the definition, padding
measured, extraction means against the texts run one by one, the in-process analyses and
``isoscope massive``).

    .venv/bin/python benchmarks/zoo_third_table.py                                # print it
    .venv/bin/python benchmarks/zoo_third_table.py --write docs/architectures.md  # replace it there

``--write`` replaces what lies between the page's ``<!-- third zoo table -->`` and
``<!-- end third zoo table -->`` lines.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.zoo_table import splice  # noqa: E402
from isoscope.engine.environment import quiet_libraries, use_offline_environment  # noqa: E402
from tests import zoo_third  # noqa: E402

COLUMNS = ("causal", "padding", "extraction", "norms", "massive + sinks", "queries/keys",
           "quant sites", "CLI massive")  # fmt: skip


def _cell(family: str, check: str, result: str, folder: Path) -> str:
    if result in ("works", "yes", "no", "harmless"):
        return result
    kind, _, why = result.partition(": ")
    why = re.sub(r"'?/\S*/" + re.escape(folder.name) + r"\b'?", "the model", why)
    why = why.replace("|", "/")
    why = why if len(why) <= 80 else why[:79] + "…"
    return f"{kind}: {why}" if why else kind


def row(family: str, tmp: Path) -> list[str]:
    folder = zoo_third.build(family, tmp / family)
    return row_of(family, zoo_third.outcomes(family, folder, tmp / family), folder)


def row_of(family: str, got: dict[str, str], folder: Path) -> list[str]:
    """The table row of one family's :func:`tests.zoo_third.outcomes`."""
    _, _, kind = zoo_third.FAMILIES[family]
    if got["load"] != "works":
        cell = _cell(family, "load", got["load"], folder)
        return [family, kind, cell, *([""] * len(COLUMNS))]
    bad = [c for c in zoo_third.CHECKS if not (got[c] == "works" or got[c].startswith("refused"))]
    result = "read right" if not bad else "FAILS: " + ", ".join(bad)
    return [family, kind, result, *(_cell(family, c, got[c], folder) for c in COLUMNS)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write", type=Path, help="a markdown page whose third-zoo table to replace"
    )
    parser.add_argument("families", nargs="*", help="only these families (default: all)")
    args = parser.parse_args(argv)
    use_offline_environment()
    quiet_libraries()
    started = time.perf_counter()
    header = ["family", "kind", "result", *COLUMNS]
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    with tempfile.TemporaryDirectory() as tmp:
        for family in args.families or zoo_third.FAMILIES:
            table.append("| " + " | ".join(row(family, Path(tmp))) + " |")
    if args.write is not None:
        args.write.write_text(splice(args.write.read_text(), "third", table))
    else:
        print("\n".join(table))
    sys.stderr.write(f"third zoo in {time.perf_counter() - started:.0f} s\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
