"""The report as one self-contained HTML page (plotly.js inlined once, fixed figure ids, no
timestamp: the same report gives the same bytes). Takes a :class:`~isoscope.share.report.model.Report`."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from isoscope.engine.jsonio import strict_json

_CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, Roboto, sans-serif; margin: 0; color: #1d1d1f;
       background: #fafafa; line-height: 1.5; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 32px 64px; background: #fff; }
h1 { margin-bottom: 0; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 40px; }
.meta { color: #555; margin-top: 4px; }
nav ol { columns: 2; } nav a { text-decoration: none; }
ul.findings li { margin-bottom: 6px; }
.skipped { color: #666; font-style: italic; }
.note { color: #555; font-size: 0.92em; }
.source { color: #555; font-size: 0.88em; margin-top: 8px; }
table { border-collapse: collapse; margin: 12px 0; font-size: 0.92em; }
th, td { border: 1px solid #ddd; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
.figure { margin: 16px 0; }
footer { color: #777; font-size: 0.85em; margin-top: 48px; }
"""


def _table(rows: list[dict]) -> str:
    if not rows:
        return ""
    columns = list(rows[0])
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(row.get(c, '')))}</td>" for c in columns) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure_html(fig, div_id: str) -> str:
    try:
        # Plotly's own template, whatever the process default (Streamlit installs its own): the
        # app's download and the CLI then write the same bytes.
        fig = go.Figure(fig).update_layout(template="plotly")
        return fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=div_id,
            config={"displaylogo": False, "responsive": True},
        )
    except Exception as exc:  # one broken figure must not lose the report
        return f'<p class="skipped">Figure not rendered ({html.escape(type(exc).__name__)}).</p>'


def _section_html(section) -> str:
    parts = [f'<section id="{section.key}"><h2>{html.escape(section.title)}</h2>']
    if section.skipped is not None:
        parts.append(f'<p class="skipped">Left out: {html.escape(section.skipped)}.</p>')
    else:
        if section.findings:
            items = "".join(f"<li>{html.escape(f)}</li>" for f in section.findings)
            parts.append(f'<ul class="findings">{items}</ul>')
        for note in section.notes:
            parts.append(f'<p class="note">{html.escape(note)}</p>')
        for i, fig in enumerate(section.figures):
            parts.append(f'<div class="figure">{_figure_html(fig, f"fig-{section.key}-{i}")}</div>')
        for caption, rows in section.tables:
            parts.append(f"<h3>{html.escape(caption)}</h3>{_table(rows)}")
    if section.source:
        parts.append(f'<p class="source">Sources: {html.escape(section.source)}.</p>')
    parts.append("</section>")
    return "\n".join(parts)


def render_html(report) -> str:
    """One self-contained HTML page: plotly.js inlined once, no network access needed."""
    from plotly.offline import get_plotlyjs

    from isoscope.plots.overview import model_card_rows

    model = report.model
    name = str(model.get("display_name") or model.get("source"))
    corpus = report.corpus
    findings = report.findings()
    toc = "".join(
        f'<li><a href="#{s.key}">{html.escape(s.title)}</a>'
        + (" (left out)" if s.skipped is not None else "")
        + "</li>"
        for s in report.sections
    )
    summary = (
        "".join(
            f"<li><b>{html.escape(title)}:</b> {html.escape(text)}</li>" for title, text in findings
        )
        or "<li>No findings could be computed.</li>"
    )
    corpus_rows = [
        {"field": "name", "value": corpus["name"]},
        {"field": "texts", "value": f"{corpus['num_texts']:,}"},
        {"field": "tokens analysed", "value": f"{corpus['num_tokens']:,}"},
        {"field": "token sample (pairwise metrics)", "value": f"{corpus['token_sample']:,}"},
        {"field": "sentence pairs", "value": f"{corpus['sentence_pairs']:,}"},
        {"field": "SHA-256 (first 20 hex)", "value": corpus["sha256"]},
    ] + [{"field": "notice", "value": n} for n in corpus["notices"]]
    settings_rows = [
        {"setting": f"{group}.{k}", "value": strict_json(v)}
        for group, values in report.settings.items()
        for k, v in values.items()
    ]
    body = "\n".join(
        [
            "<main>",
            f"<h1>isoscope report: {html.escape(name)}</h1>",
            f'<p class="meta">{html.escape(str(model.get("architecture")))} · {model.get("num_layers")} layers · '
            f"width {model.get('hidden_size')} · corpus {html.escape(str(corpus['name']))} "
            f"({corpus['num_texts']:,} texts, {corpus['num_tokens']:,} "
            f"tokens) · isoscope {html.escape(report.version)}</p>",
            f'<nav><ol><li><a href="#findings">Findings</a></li>{toc}'
            '<li><a href="#model">Model card</a></li><li><a href="#corpus">Corpus</a></li>'
            '<li><a href="#settings">Settings</a></li></ol></nav>',
            f'<section id="findings"><h2>Findings</h2><ul class="findings">{summary}</ul></section>',
            *(_section_html(s) for s in report.sections),
            f'<section id="model"><h2>Model card</h2>{_table(model_card_rows(model))}</section>',
            f'<section id="corpus"><h2>Corpus</h2>{_table(corpus_rows)}</section>',
            f'<section id="settings"><h2>Settings</h2>{_table(settings_rows)}</section>',
            f"<footer>Written by isoscope {html.escape(report.version)} from measured numbers; hidden states "
            "are named emb (the embedding output) and 1 … L. Hidden state indices, dims and pairs are "
            "0-based; every analysis is seeded.</footer>",
            "</main>",
        ]
    )
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>isoscope report: {html.escape(name)}</title><style>{_CSS}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>\n'
        f"<body>\n{body}\n</body></html>\n"
    )
