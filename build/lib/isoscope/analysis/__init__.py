"""isoscope's analyses, each declared once in :data:`ANALYSES`.

An analysis has one name, the same in every layer: its computation (``isoscope.analysis.<name>``,
a module or a package), its figures (``isoscope.plots.<name>``), its view
(``isoscope.ui.views.<name>``), its page (``pages/<name>.py``, served at the URL path ``<name>``),
its link controls (``LINK_CONTROLS["<name>"]`` in ``isoscope.ui.widgets.ranges``), its CLI
command(s) (``isoscope.commands.<command>``) and its report section (``<name>``).

The navigation (``app.py``), the CLI (:mod:`isoscope.cli`) and the report
(:mod:`isoscope.share.report`) read :data:`ANALYSES`; nothing else lists the analyses. This module
holds plain data and imports nothing of isoscope, so reading it costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Analysis:
    """One analysis's declaration.

    ``name``: the one word of every layer (see the module docstring). ``title`` and ``icon``: its
    page in the navigation. ``commands``: the CLI commands it adds (modules of
    ``isoscope.commands``; the first is usually ``name``), with ``aliases`` their former names.
    ``report_title``: its section in the report (``None``: no section); ``report_optional``: built
    only when asked for. ``sources``: the papers it follows, as the report cites them.
    """

    name: str
    title: str
    icon: str
    commands: tuple[str, ...] = ()
    report_title: str | None = None
    report_optional: bool = False
    sources: str = ""

    @property
    def page(self) -> str:
        """Its page's file in ``pages/``."""
        return f"{self.name}.py"


ANALYSES: tuple[Analysis, ...] = (
    Analysis("overview", "Overview", ":material/dashboard:", commands=("analyze",)),
    Analysis(
        "outliers",
        "Outlier dimensions",
        ":material/grid_on:",
        report_title="Outlier dimensions",
        sources="Luo, Kulmizev & Mao 2021, arXiv 2011.04393; "
        "Timkey & van Schijndel 2021, arXiv 2109.04404",
    ),
    Analysis(
        "anisotropy",
        "Anisotropy",
        ":material/scatter_plot:",
        report_title="Anisotropy and what clipping does",
        sources="Ethayarajh 2019, arXiv 1909.00512; Timkey & van Schijndel 2021, arXiv "
        "2109.04404; Rudman et al. 2022, arXiv 2108.07344; Luo et al. 2021, arXiv 2011.04393",
    ),
    Analysis("projections", "Clipping & projections", ":material/bubble_chart:"),
    Analysis(
        "similarity",
        "Sentence similarity",
        ":material/compare_arrows:",
        commands=("similarity",),
        report_title="Sentence similarity",
        sources="Luo et al. 2021, Table 2; Timkey & van Schijndel 2021",
    ),
    Analysis(
        "layernorm",
        "LayerNorm",
        ":material/tune:",
        commands=("layernorm",),
        report_title="LayerNorm outliers and their ablation",
        sources="Kovaleva, Kulshreshtha, Rogers & Rumshisky 2021 (BERT Busters), arXiv 2105.06990",
    ),
    Analysis(
        "positional",
        "Positional information",
        ":material/timeline:",
        commands=("positional", "qk"),
        report_title="Positional information",
        sources="Luo, Kulmizev & Mao 2021, arXiv 2011.04393 (section 4)",
    ),
    Analysis(
        "massive",
        "Massive activations & sinks",
        ":material/bolt:",
        commands=("massive",),
        report_title="Massive activations and attention sinks",
        sources="Sun, Chen, Kolter & Liu 2024, Massive Activations, arXiv 2402.17762; "
        "Xiao et al. 2023, attention sinks, arXiv 2309.17453",
    ),
    Analysis(
        "dimension",
        "What is this dimension?",
        ":material/search:",
        commands=("dimension",),
        report_title="The headline dimensions, explained",
        sources="Elhage et al. 2021, A Mathematical Framework for Transformer Circuits; "
        "Kobayashi et al. 2021, arXiv 2109.07152; Sun et al. 2024, arXiv 2402.17762; "
        "Bondarenko et al. 2023, arXiv 2306.12929",
    ),
    Analysis(
        "quant",
        "Quantization readiness",
        ":material/compress:",
        commands=("quant",),
        report_title="Quantization readiness",
        report_optional=True,
        sources="Dettmers et al. 2022, LLM.int8(), arXiv 2208.07339; Xiao et al. 2023, "
        "SmoothQuant, arXiv 2211.10438; Ashkboos et al. 2024, QuaRot, arXiv 2404.00456; "
        "Bondarenko et al. 2023, arXiv 2306.12929",
    ),
    Analysis(
        "sae",
        "SAE features",
        ":material/category:",
        commands=("sae",),
        sources="Bricken et al. 2023, Towards Monosemanticity; Gao et al. 2024, arXiv 2406.04093; "
        "Rajamanoharan et al. 2024, arXiv 2407.14435; Lieberum et al. 2024, arXiv 2408.05147",
    ),
    Analysis("compare", "Compare", ":material/difference:", commands=("compare", "trajectory")),
    Analysis("tour", "Guided tour", ":material/school:"),
)

# Commands that belong to no one analysis: the server, the cache, whole-run outputs.
SERVICE_COMMANDS: tuple[str, ...] = ("serve", "prewarm", "cache", "report", "export")


def analysis(name: str) -> Analysis:
    """The declaration named ``name``; a KeyError names the declared ones."""
    for declared in ANALYSES:
        if declared.name == name:
            return declared
    raise KeyError(f"no analysis {name!r}; declared: {', '.join(a.name for a in ANALYSES)}")
