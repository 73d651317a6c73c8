"""The third zoo (tests/zoo_third.py: text families that neither other zoo holds, 2 layers,
width 32), saved with a tokenizer and loaded through the real loader. Per family, each check is
read right or refused in one line, never an internal error or a silently wrong number:

- the causal flag equals the definition (changing the last token moves no earlier position);
- padding is measured: the families whose real tokens move when a batch is padded (Fourier
  mixing, convolutions, Nyström or hashing approximations) and only those run unpadded;
- the per-state means of the real extraction, with batches of one text and of all texts (mixed
  lengths, most padding), equal the means over the texts run one by one, within 1e-5;
- norms, int8, massive activations, queries/keys and quantization sites work or refuse in one
  line, and ``massive`` through the CLI exits 0 or 2 with one line.

- the queries/keys view analyses every family whose layers compute softmax attention over the
  whole text, and refuses the others (``zoo_third.QK_REFUSED``) in one line that says why.

docs/architectures.md keeps the table of outcomes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import zoo_third

pytestmark = pytest.mark.slow


def _bad(cell: str) -> bool:
    return not (cell == "works" or cell.startswith("refused: "))


@pytest.mark.parametrize("family", list(zoo_third.FAMILIES))
def test_third_family_is_read_right_or_refused_in_one_line(family, tmp_path):
    folder = zoo_third.build(family, tmp_path / family)
    got = zoo_third.outcomes(family, folder, tmp_path)
    if family in zoo_third.LOAD_REFUSED:
        assert got["load"].startswith("refused: "), got["load"]
        assert zoo_third.LOAD_REFUSED[family] in got["load"]
        return
    assert got["load"] == "works", got["load"]
    assert "WRONG" not in got["causal"], got["causal"]
    assert (got["padding"] != "harmless") is (family in zoo_third.PAD_SENSITIVE)
    bad = {k: got[k] for k in zoo_third.CHECKS if _bad(got[k])}
    assert not bad
    why = zoo_third.QK_REFUSED.get(family)
    if why is None:
        assert got["queries/keys"] == "works", got["queries/keys"]
    else:
        for check in ("queries/keys", "q/k before RoPE"):
            assert got[check].startswith("refused: ") and why in got[check], got[check]


def test_the_architectures_page_lists_the_third_zoo():
    """docs/architectures.md's third-zoo table has one row per family of tests/zoo_third.py."""
    page = (Path(__file__).resolve().parents[3] / "docs" / "architectures.md").read_text()
    table = page.split("<!-- third zoo table -->")[1].split("<!-- end third zoo table -->")[0]
    rows = [line.strip("|").split("|") for line in table.strip().splitlines()[2:]]
    assert sorted(r[0].strip() for r in rows) == sorted(zoo_third.FAMILIES)
    assert len(zoo_third.FAMILIES) >= 40
