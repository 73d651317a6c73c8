"""The report's "headline dimensions, explained" section: a compact dimension card
(:func:`isoscope.analysis.dimension.dimension_card`) for each headline outlier dimension.

The dimensions are the outliers section's own: the headline dimension
(:func:`isoscope.plots.outliers.headline_outlier`, the one flagged at the most hidden states) at
the state where its mean is largest, then the other headline dims of that state
(:func:`isoscope.analysis.outliers.headline_dims`, by |mean|), at most
``ReportSettings.dimension_cards`` of them. Each card is one forward pass with hooks over the first
``ReportSettings.card_texts`` texts of the corpus, with no ablation; it shows the dimension's
top tokens at both ends, its largest writers (layer, component, mean contribution) with the sum
check, and the projections that read it most strongly. A card that cannot be built is one note
line; the other cards and the report go on.
"""

from __future__ import annotations

import traceback

import numpy as np

from isoscope.engine.errors import IsoscopeError
from isoscope.share.report.model import SECTION_TITLES, SOURCES, Section

KEY = "dimension"
TOKENS_SHOWN = 3  # top tokens listed at each end
WRITERS_SHOWN = 5  # largest writers listed
READERS_SHOWN = 3  # strongest reading projections listed


def _picked(ctx) -> tuple[int, list[int]] | None:
    """(state index, dims) of the cards: the headline dimension first, at its strongest state,
    then that state's other headline dims; None when nothing is flagged."""
    from isoscope.plots.outliers import headline_outlier

    r = ctx.result
    headline = headline_outlier(r, ctx.criteria_by_state)
    if headline is None:
        return None
    state = list(r.state_names).index(headline["state"])
    dims = [int(headline["dim"])]
    dims += [int(j) for j in ctx.outliers_by_state[state] if int(j) != dims[0]]
    return state, dims[: ctx.settings.dimension_cards]


def _where(layer: int, names) -> str:
    return "embeddings" if layer == 0 else f"layer {names[layer]}"


def _component(row: dict) -> str:
    name = str(row["component"])
    if "head" in row:
        name += f" {row['head']}"
    if "expert" in row:
        name += f" {row['expert']}"
    if "norm" in row:
        name += f" ({row['norm']})"
    return name


def _tokens_table(card) -> list[dict]:
    rows = []
    for end in ("high", "low"):
        picks = [t for t in card.top_tokens if t["end"] == end][:TOKENS_SHOWN]
        rows += [
            {
                "end": end,
                "token": t["token"],
                "value": f"{t['value']:+.3f}",
                "context": t["context"],
            }
            for t in picks
        ]
    return rows


def _writers(card) -> list[dict]:
    return sorted(card.contributions, key=lambda r: -abs(r["mean"]))[:WRITERS_SHOWN]


def _writers_table(card, names) -> list[dict]:
    return [
        {
            "layer": _where(int(r["layer"]), names),
            "component": _component(r),
            "mean contribution": f"{r['mean']:+.3f}",
        }
        for r in _writers(card)
    ]


def _readers(card) -> list[dict]:
    """The projections that read the dimension most strongly (column norm over the median)."""
    found = [
        {
            "layer": "final" if reader["layer"] is None else str(reader["layer"]),
            "norm": reader["norm"],
            "gamma at the dim": f"{reader['gamma']:+.3f}",
            "projection": p["projection"],
            "reads it at": f"{p['ratio']:.2f}x the median column",
            "ratio": p["ratio"],
        }
        for reader in card.readers
        for p in reader["projections"]
        if p["ratio"] is not None and np.isfinite(p["ratio"])
    ]
    found.sort(key=lambda r: -r["ratio"])
    return [{k: v for k, v in r.items() if k != "ratio"} for r in found[:READERS_SHOWN]]


def _finding(card, dim: int, state_name: str) -> str:
    mean = float(np.mean(card.values)) if card.n_tokens else float("nan")
    high = next((t for t in card.top_tokens if t["end"] == "high"), None)
    low = next((t for t in card.top_tokens if t["end"] == "low"), None)
    parts = [
        f"Dimension {dim} at state {state_name}: mean {mean:+.3f} over {card.n_tokens:,} tokens"
    ]
    if high is not None and low is not None:
        parts[0] += (
            f", largest at {high['token']!r} ({high['value']:+.2f}) and smallest at "
            f"{low['token']!r} ({low['value']:+.2f})"
        )
    writers = _writers(card)
    if writers:
        top = writers[0]
        parts.append(
            f"its largest writer is the {_component(top)} of "
            f"{_where(int(top['layer']), card.state_names)} (mean {top['mean']:+.3f})"
        )
    readers = _readers(card)
    if readers:
        parts.append(
            f"{readers[0]['projection']} reads it most strongly ({readers[0]['reads it at']})"
        )
    return "; ".join(parts) + "."


def _failure(dim: int, exc: Exception) -> str:
    if isinstance(exc, IsoscopeError):
        return f"Dimension {dim}: no card ({exc})."
    last = traceback.extract_tb(exc.__traceback__)[-1]
    return (
        f"Dimension {dim}: the card could not be built ({type(exc).__name__}: {str(exc)[:200]} "
        f"at {last.filename.rsplit('/', 1)[-1]}:{last.lineno})."
    )


def dimension_section(ctx) -> Section:
    """The section (module doc); skipped in one line when nothing is flagged or the analysis did
    not read text."""
    sec = Section(KEY, SECTION_TITLES[KEY], source=SOURCES[KEY])
    if ctx.kind != "text":
        from isoscope.engine.inputs.media import KIND_NOUNS

        sec.skipped = (
            "does not apply: the dimension card reads texts through the tokenizer, and this "
            f"analysis read {KIND_NOUNS[ctx.kind]}"
        )
        return sec
    if ctx.settings.dimension_cards == 0:
        sec.skipped = "no dimension cards were asked for (dimension cards = 0)"
        return sec
    picked = _picked(ctx)
    if picked is None:
        sec.skipped = "no dimension is an outlier at any hidden state, so none is explained"
        return sec
    from isoscope.analysis.dimension import DimensionSettings, dimension_card
    from isoscope.analysis.dimension.params import BATCH_SIZE, MAX_LENGTH

    state, dims = picked
    r = ctx.result
    name = r.state_names[state]
    texts = list(r.texts[: ctx.settings.card_texts])
    length = min(max(int(r.settings.max_length), MAX_LENGTH.low), MAX_LENGTH.high)
    batch = min(max(int(r.settings.batch_size), BATCH_SIZE.low), BATCH_SIZE.high)
    for dim in dims:
        try:
            card = dimension_card(
                ctx.loaded,
                texts,
                DimensionSettings(
                    state=state,
                    dim=dim,
                    max_length=length,
                    batch_size=batch,
                    ablation_texts=0,
                ),
            )
        except Exception as exc:  # one card's failure is one line; the report goes on
            sec.notes.append(_failure(dim, exc))
            continue
        sec.findings.append(_finding(card, dim, name))
        sec.tables.append((f"Dimension {dim} at state {name}: top tokens", _tokens_table(card)))
        sec.tables.append(
            (
                f"Dimension {dim} at state {name}: largest writers (mean contribution over "
                f"{card.n_tokens:,} tokens; all {len(card.contributions)} parts sum to the value "
                f"within {card.sum_check:.1e}, largest |value| {card.value_scale:.3g})",
                _writers_table(card, card.state_names),
            )
        )
        readers = _readers(card)
        if readers:
            sec.tables.append(
                (
                    f"Dimension {dim}: the projections that read it most strongly (weight "
                    "column norm times |gamma| at the dim, over the median column)",
                    readers,
                )
            )
        sec.notes.extend(f"Dimension {dim}: {note}" for note in card.notes)
    sec.notes.append(
        f"Cards for at most {ctx.settings.dimension_cards} headline dims of state {name} "
        f"(the headline dimension first), each one forward pass over the first {len(texts)} "
        "texts of the corpus, without ablation; the dimension page gives the full card."
    )
    return sec
