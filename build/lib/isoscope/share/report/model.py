"""The report's data model: section names and sources, :class:`ReportSettings`, :class:`Section`
and :class:`Report` (rendered by :mod:`isoscope.share.report.render`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from isoscope.analysis import ANALYSES
from isoscope.analysis.anisotropy import N_PAIRS, PAIR_SEED
from isoscope.analysis.layernorm.thresholds import RANDOM_CONTROLS
from isoscope.analysis.positional.params import MAX_POSITION, PROBE_ITER
from isoscope.engine.errors import InputError
from isoscope.share.report.render import render_html

SECTION_TITLES = {a.name: a.report_title for a in ANALYSES if a.report_title}
# Built only when asked for (`isoscope report --quant`; the app once its page has run): the
# quantization analysis costs several passes of the model.
OPTIONAL_SECTIONS = tuple(a.name for a in ANALYSES if a.report_title and a.report_optional)
SECTIONS = tuple(k for k in SECTION_TITLES if k not in OPTIONAL_SECTIONS)
QUICK_SECTIONS = ("outliers", "anisotropy")  # no forward pass: the Overview shows them at once

# Each headline dimension's card in the report is one forward pass: at most this many.
MAX_DIMENSION_CARDS = 3

SOURCES = {a.name: a.sources for a in ANALYSES if a.report_title}


@dataclass(frozen=True)
class ReportSettings:
    """Parameters of the report's analyses (the ones the pages use by default)."""

    pairs: int = N_PAIRS  # random different-text token pairs for anisotropy
    seed: int = PAIR_SEED
    ablation_texts: int = 64  # texts the LayerNorm ablation runs on
    random_controls: int = RANDOM_CONTROLS.default
    probe_max_position: int = MAX_POSITION.default
    probe_iter: int = PROBE_ITER.default
    projection_points: int = 2000
    massive_texts: int = 64  # texts of the massive-activation / sink scan
    quant_texts: int = 64  # texts of the quantization analysis (the optional section)
    dimension_cards: int = 3  # headline dims given a dimension card (0 to MAX_DIMENSION_CARDS)
    card_texts: int = 64  # texts each dimension card's forward pass reads

    def __post_init__(self) -> None:
        if self.pairs < 1:
            raise InputError(f"anisotropy pairs must be at least 1, got {self.pairs}")
        if not 2 <= self.ablation_texts <= 50_000:
            raise InputError(
                f"ablation texts must be between 2 and 50,000, got {self.ablation_texts}"
            )
        RANDOM_CONTROLS.check(self.random_controls, "random controls")
        if not 1 <= self.quant_texts <= 50_000:
            raise InputError(
                f"quantization texts must be between 1 and 50,000, got {self.quant_texts}"
            )
        MAX_POSITION.check(self.probe_max_position, "probe max position")
        if not 0 <= self.dimension_cards <= MAX_DIMENSION_CARDS:
            raise InputError(
                f"dimension cards must be between 0 and {MAX_DIMENSION_CARDS} (each is a forward "
                f"pass), got {self.dimension_cards}"
            )
        if not 1 <= self.card_texts <= 50_000:
            raise InputError(
                f"dimension card texts must be between 1 and 50,000, got {self.card_texts}"
            )


@dataclass
class Section:
    """One report section: findings (sentences), figures, tables; or ``skipped``, one line why not."""

    key: str
    title: str
    findings: list[str] = field(default_factory=list)
    figures: list[Any] = field(default_factory=list)  # plotly Figures
    tables: list[tuple[str, list[dict]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None
    source: str = ""


@dataclass
class Report:
    """Everything the HTML shows; :meth:`to_html` renders it, :meth:`to_json` gives the findings."""

    model: dict
    corpus: dict
    settings: dict
    version: str
    sections: list[Section]

    def named(self, model: dict) -> Report:
        """This report with ``model`` as its card: a report kept per extraction key is shared by
        every path with the same weights, and names the one opened now
        (:mod:`isoscope.engine.store.provenance`)."""
        return replace(self, model=dict(model))

    def section(self, key: str) -> Section | None:
        return next((s for s in self.sections if s.key == key), None)

    def findings(self) -> list[tuple[str, str]]:
        """(section title, sentence) for every finding, in section order."""
        return [(s.title, f) for s in self.sections if s.skipped is None for f in s.findings]

    def to_json(self) -> dict:
        return {
            "version": self.version,
            "model": self.model,
            "corpus": self.corpus,
            "settings": self.settings,
            "sections": [
                {
                    "key": s.key,
                    "title": s.title,
                    "findings": s.findings,
                    "skipped": s.skipped,
                    "notes": s.notes,
                    "source": s.source,
                }
                for s in self.sections
            ],
        }

    def to_html(self) -> str:
        return render_html(self)
