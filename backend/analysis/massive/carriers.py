"""The carriers of massive activations in a text (Sun et al. 2024, section 2): the first position,
delimiter tokens ("." "," "\\n"), or other tokens; and the count of a scan's massive activations
by carrier, their most frequent dims and tokens.

A text model's carriers are :data:`CARRIERS`, named by :func:`text_carrier`; image and speech
models name their own (``isoscope.analysis.massive.highnorm``) and pass them to
:meth:`isoscope.analysis.massive.massive.MassiveAccumulator.finish`.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Callable

import numpy as np

_NEWLINES = ("Ċ", "<0x0A>", "\n", "ĊĊ", "\n\n")


def is_delimiter(token: str) -> bool:
    """Punctuation, newline or whitespace-only tokens ("." "," "\\n" "Ċ" "<0x0A>"): Sun et al.'s
    delimiters."""
    if token in _NEWLINES:
        return True
    core = token.removeprefix("##").strip("Ġ▁Ċ \n\t")
    if not core:
        return bool(token)  # a whitespace/newline marker
    return all(unicodedata.category(c)[0] in "PS" for c in core)


CARRIERS = ("first", "delimiter", "other")  # a decoder's carriers; image models: IMAGE_CARRIERS


def text_carrier(position: int, token: str) -> str:
    """Sun et al.'s carriers in a text: the first position, a delimiter, or another token."""
    return "first" if position == 0 else ("delimiter" if is_delimiter(token) else "other")


def count_carriers(
    rows: np.ndarray,
    num_states: int,
    id_to_token,
    carrier_of: Callable[[int, str], str] = text_carrier,
    kinds: tuple[str, ...] = CARRIERS,
) -> list[dict]:
    """Per state: massive activations by carrier (``carrier_of(position, token)``, one of
    ``kinds``), top dims and tokens. ``rows``: (m, 5) int64 (state, dim, text, position, token id)."""
    vocab: dict[int, str] = {}
    out = []
    for s in range(num_states):
        mine = rows[rows[:, 0] == s]
        counts = dict.fromkeys(kinds, 0)
        tokens: Counter[str] = Counter()
        for position, tid in mine[:, 3:5].tolist():
            if tid not in vocab:
                vocab[tid] = id_to_token([tid])[0]
            token = vocab[tid]
            counts[carrier_of(position, token)] += 1
            tokens[token] += 1
        dims = Counter(mine[:, 1].tolist())
        out.append(
            counts
            | {
                "dims": [[int(k), int(v)] for k, v in dims.most_common(5)],
                "tokens": [[k, int(v)] for k, v in tokens.most_common(5)],
            }
        )
    return out
