"""The report's data model: section names and sources, :class:`ReportSettings`, :class:`Section`
and :class:`Report` (rendered by :mod:`isoscope.share.report.render`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from isoscope.analysis.anisotropy import N_PAIRS, PAIR_SEED
from isoscope.analysis.layernorm.thresholds import RANDOM_CONTROLS
from isoscope.analysis.positional.params import MAX_POSITION, PROBE_ITER
from isoscope.engine.errors import InputError
from isoscope.share.report.render import render_html

SECTION_TITLES = {
    "outliers": "Outlier dimensions",
    "anisotropy": "Anisotropy and what clipping does",
    "layernorm": "LayerNorm outliers and their ablation",
    "positional": "Positional information",
    "similarity": "Sentence similarity",
    "massive": "Massive activations and attention sinks",
    "quant": "Quantization readiness",
}
# Built only when asked for (`isoscope report --quant`; the app once its page has run): the
# quantization analysis costs several passes of the model.
OPTIONAL_SECTIONS = ("quant",)
SECTIONS = tuple(k for k in SECTION_TITLES if k not in OPTIONAL_SECTIONS)
QUICK_SECTIONS = ("outliers", "anisotropy")  # no forward pass: the Overview shows them at once

SOURCES = {
    "outliers": "Luo, Kulmizev & Mao 2021, arXiv 2011.04393; Timkey & van Schijndel 2021, arXiv 2109.04404",
    "anisotropy": "Ethayarajh 2019, arXiv 1909.00512; Timkey & van Schijndel 2021, arXiv 2109.04404; "
    "Rudman et al. 2022, arXiv 2108.07344; Luo et al. 2021, arXiv 2011.04393",
    "layernorm": "Kovaleva, Kulshreshtha, Rogers & Rumshisky 2021 (BERT Busters), arXiv 2105.06990",
    "positional": "Luo, Kulmizev & Mao 2021, arXiv 2011.04393 (section 4)",
    "similarity": "Luo et al. 2021, Table 2; Timkey & van Schijndel 2021",
    "massive": "Sun, Chen, Kolter & Liu 2024, Massive Activations, arXiv 2402.17762; "
    "Xiao et al. 2023, attention sinks, arXiv 2309.17453",
    "quant": "Dettmers et al. 2022, LLM.int8(), arXiv 2208.07339; Xiao et al. 2023, SmoothQuant, "
    "arXiv 2211.10438; Ashkboos et al. 2024, QuaRot, arXiv 2404.00456; Bondarenko et al. 2023, "
    "arXiv 2306.12929",
}


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
