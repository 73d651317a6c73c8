"""The report package as a whole: data model, prose builders and HTML renderer each in its own
module (the modules themselves: tests/unit/share/report/)."""

from __future__ import annotations


def test_the_report_package_keeps_data_prose_and_html_apart():
    """``isoscope.share.report`` re-exports a data model, the prose builders and the HTML renderer,
    each in its own module; the renderer needs nothing of the data model's module."""
    import ast
    import inspect

    import isoscope.share.report as package
    from isoscope.share.report import render

    homes = {name: getattr(package, name).__module__ for name in ("Report", "Section")}
    assert set(homes.values()) == {"isoscope.share.report.model"}
    assert package.build_report.__module__ == "isoscope.share.report.build"
    assert package.render_html.__module__ == "isoscope.share.report.render"
    assert set(package.BUILDERS) == set(package.SECTIONS) | set(package.OPTIONAL_SECTIONS)
    assert not set(package.SECTIONS) & set(package.OPTIONAL_SECTIONS)  # opt-in sections
    imported = {
        node.module
        for node in ast.walk(ast.parse(inspect.getsource(render)))
        if isinstance(node, ast.ImportFrom)
    }
    assert not any(m and m.startswith("isoscope.share") for m in imported)
