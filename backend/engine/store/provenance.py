"""What a result was computed from, and what the user opened: the model card's provenance.

The result cache is keyed by what identifies a computation (weights fingerprint, corpus hash,
settings), so one checkpoint copied to a second path, or a renamed GGUF file, reuses the first
run's arrays. The card's provenance fields must still name what the user opened in this session:
:func:`attribute` puts them on a result (from the cache, the process's memory or a fresh run) and,
when the statistics were computed from another path with identical weights, adds one
``reused_from`` entry that the card shows as one line.

Provenance fields (:data:`PROVENANCE_FIELDS`), all on :class:`isoscope.engine.load.models.ModelInfo`:

- ``source``: what the user typed or linked (``default``, a folder, a ``.gguf`` file, a Hub id).
- ``display_name``: the card's name.
- ``path``: the absolute folder or ``.gguf`` file that was opened (None for ``random:`` models).
- ``revision``: the Hub commit the files came from, once Hub downloads exist (None otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # type hints only: importing it would pull torch into the figure builders
    from isoscope.engine.extraction import ExtractionResult

PROVENANCE_FIELDS = ("source", "display_name", "path", "revision")
REUSED_KEY = "reused_from"  # the card's entry when the statistics came from another path
FINGERPRINT_SHOWN = 12  # characters of the fingerprint the card's line shows


def provenance(card: Mapping[str, Any]) -> dict[str, Any]:
    """The provenance fields of a model card (missing ones as None)."""
    return {name: card.get(name) for name in PROVENANCE_FIELDS}


def _where(card: Mapping[str, Any]) -> str:
    """The path a card names (older cards have no ``path``: their source), plus its revision."""
    where = str(card.get("path") or card.get("source") or "")
    return where + (f"@{card['revision']}" if card.get("revision") else "")


def relabel_card(
    computed: Mapping[str, Any], opened: Mapping[str, Any], fingerprint: str
) -> dict[str, Any]:
    """``computed`` (the card stored with the statistics) with ``opened``'s provenance fields.

    When the two name different paths (or revisions), the card gets ``reused_from``: the
    fingerprint and the provenance the statistics were computed from. Idempotent: a card already
    relabelled keeps the path it was first computed from."""
    card = dict(computed)
    first = card.pop(REUSED_KEY, None) or provenance(computed)
    card.update(
        {name: opened.get(name) for name in PROVENANCE_FIELDS if name in opened or name in card}
    )
    if _where(first) != _where(card):
        card[REUSED_KEY] = {"fingerprint": fingerprint, **provenance(first)}
    return card


def attribute(result: ExtractionResult, opened: Mapping[str, Any]) -> ExtractionResult:
    """``result`` whose model card names ``opened`` (a card, e.g. ``loaded.info.to_dict()``).

    The arrays are shared, not copied; a result whose card already names ``opened`` is returned
    as it is."""
    card = relabel_card(result.model, opened, result.model_fingerprint)
    return result if card == result.model else replace(result, model=card)


def reuse_line(card: Mapping[str, Any]) -> str | None:
    """The card's one line when its statistics came from another path, else None:
    ``reused from an identical checkpoint, fingerprint 3f9c…, computed from /first/path``."""
    first = card.get(REUSED_KEY)
    if not first:
        return None
    fingerprint = str(first.get("fingerprint") or "?")
    short = fingerprint[:FINGERPRINT_SHOWN] + ("…" if len(fingerprint) > FINGERPRINT_SHOWN else "")
    return (
        f"reused from an identical checkpoint, fingerprint {short}, computed from {_where(first)}"
    )
