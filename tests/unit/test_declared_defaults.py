"""One default per declared parameter: every command's option and every page's widget of a declared
parameter takes its default from the declaration (isoscope.engine.params.Interval and the analyses'
own declarations), and a declaration has one name. The CLI is read from its parsers, the pages
from their source (no Streamlit run)."""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
from pathlib import Path

import pytest

from isoscope.cli import build_parser
from isoscope.engine.params import Interval

ROOT = Path(__file__).resolve().parents[2]

# Where parameters are declared: the extraction's and the literature's (engine.params), and each
# analysis's own, beside it.
DECLARATION_MODULES = (
    "isoscope.engine.params",
    "isoscope.analysis.outliers",
    "isoscope.analysis.anisotropy",
    "isoscope.analysis.layernorm.thresholds",
    "isoscope.analysis.quant.params",
    "isoscope.analysis.massive.params",
    "isoscope.analysis.positional.params",
)

# An option whose default is "decided from the data", stated in the declaration's place: quant's
# --alpha is None (the α sweep chooses), as the page's "Choose α by the sweep" toggle is on.
DATA_DECIDES = {("quant", "alpha")}

WIDGETS = {  # Streamlit widget -> (position of its default after the label, its keyword)
    "slider": (3, "value"),
    "number_input": (3, "value"),
    "select_slider": (2, "value"),
    "selectbox": (2, "index"),
    "radio": (2, "index"),
    "checkbox": (1, "value"),
    "toggle": (1, "value"),
}


def _declarations() -> dict[str, Interval]:
    """Every named declaration, keyed by where it is declared (``module.VARIABLE``); one imported
    into a later module counts once, at its first module."""
    found: dict[str, Interval] = {}
    for module_name in DECLARATION_MODULES:
        module = importlib.import_module(module_name)
        for var, value in vars(module).items():
            if isinstance(value, Interval) and value.name and var.isupper():
                if not any(value is seen for seen in found.values()):
                    found[f"{module_name}.{var}"] = value
    return found


DECLARATIONS = _declarations()
NAMES = {d.name for d in DECLARATIONS.values()}


def _subcommands(parser: argparse.ArgumentParser, prefix: str = ""):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix}{name}", sub
                yield from _subcommands(sub, f"{prefix}{name} ")


COMMANDS = dict(_subcommands(build_parser()))


def test_the_declarations_are_found_and_say_why():
    assert {"max_length", "batch_size", "sample_size", "seed", "k", "share", "keep"} <= NAMES
    for where, declaration in DECLARATIONS.items():
        assert declaration.help, f"{where} has no help"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_states_no_default_of_its_own_for_a_declared_parameter(command):
    for action in COMMANDS[command]._actions:
        if not action.option_strings or action.dest not in NAMES:
            continue
        flag = action.option_strings[0]
        declaration = getattr(action, "declaration", None)
        assert declaration is not None, (
            f"`{command} {flag}` is declared by hand: build it with its declaration's add_argument"
        )
        assert declaration.name == action.dest and declaration.flag == flag
        if (command, action.dest) in DATA_DECIDES:
            assert action.default is None
            continue
        assert action.default == declaration.default, (
            f"`{command} {flag}` defaults to {action.default}, its declaration to "
            f"{declaration.default}"
        )


def test_one_analysis_reads_one_declaration_in_its_command_its_page_and_its_functions():
    from isoscope.analysis.massive import params as activations
    from isoscope.analysis.massive.scan import scan_massive
    from isoscope.analysis.positional import params as positional
    from isoscope.analysis.positional.qk import qk_stats
    from isoscope.analysis.quant import params as quant
    from isoscope.analysis.quant.readiness import analyse, scan_sites
    from isoscope.ui.widgets.ranges import LINK_CONTROLS

    def option(command: str, dest: str) -> Interval:
        return next(a for a in COMMANDS[command]._actions if a.dest == dest).declaration

    expected = {
        "massive": (activations.MASSIVE_MAX_LENGTH, activations.MASSIVE_BATCH_SIZE, [scan_massive]),
        "quant": (quant.QUANT_MAX_LENGTH, quant.QUANT_BATCH_SIZE, [analyse, scan_sites]),
        "qk": (positional.QK_MAX_LENGTH, positional.QK_BATCH_SIZE, [qk_stats]),
    }
    for command, (max_length, batch_size, functions) in expected.items():
        assert option(command, "max_length") is max_length
        assert option(command, "batch_size") is batch_size
        for fn in functions:
            params = inspect.signature(fn).parameters
            assert params["max_length"].default == max_length.default, fn.__name__
            assert params["batch_size"].default == batch_size.default, fn.__name__
    assert LINK_CONTROLS["massive"]["massive_max_length"] is activations.MASSIVE_MAX_LENGTH
    assert LINK_CONTROLS["quant"]["quant_max_length"] is quant.QUANT_MAX_LENGTH
    # every other extracting command reads the extraction's own, as the sidebar does
    from isoscope.engine.extraction import ExtractionSettings
    from isoscope.engine.params import MAX_LENGTH

    assert ExtractionSettings().max_length == MAX_LENGTH.default
    for command in ("analyze", "positional", "ablate", "report", "export", "sts", "compare"):
        assert option(command, "max_length") is MAX_LENGTH, command


def _page_sources() -> list[Path]:
    return sorted((ROOT / "ui").rglob("*.py")) + sorted((ROOT / "pages").glob("*.py"))


def _declared_key(key: str) -> bool:
    """A widget key that names a declared parameter: ``<page>_<name>`` (``quant_max_length``,
    ``sb_sample_size``, ``ln_share``, ``pos_probe_seed``). One-letter names (``k``) are matched by
    their page's link declarations instead."""
    return any(key.endswith("_" + name) for name in NAMES if len(name) > 1)


def _link_keys() -> set[str]:
    from isoscope.ui.widgets.ranges import LINK_CONTROLS

    return {
        key
        for controls in LINK_CONTROLS.values()
        for key, spec in controls.items()
        if isinstance(spec, Interval) and spec.name
    }


def _literal_defaults(tree: ast.AST, keys: set[str]):
    """(line, key) of each widget call whose key is declared and whose default holds a number."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in WIDGETS:
            continue
        key = next((k.value for k in node.keywords if k.arg == "key"), None)
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        if not (key.value in keys or _declared_key(key.value)):
            continue
        position, keyword = WIDGETS[node.func.attr]
        default = next((k.value for k in node.keywords if k.arg == keyword), None)
        if default is None and len(node.args) > position:
            default = node.args[position]
        numbers = [
            n
            for n in ast.walk(default)
            if default is not None
            if isinstance(n, ast.Constant) and type(n.value) in (int, float)
        ]
        if numbers:
            yield node.lineno, key.value


def test_no_page_states_its_own_default_for_a_declared_parameter():
    keys = _link_keys()
    assert {"quant_keep", "ln_k", "out_thr_z", "massive_max_length"} <= keys
    found = []
    for path in _page_sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [
            f"{path.relative_to(ROOT)}:{line} ({key})"
            for line, key in _literal_defaults(tree, keys)
        ]
    assert found == [], f"widgets with a literal default for a declared parameter: {found}"


def test_the_page_check_sees_a_literal_default():
    planted = ast.parse(
        'c2.select_slider("Max tokens", [16, 64], 64, key="massive_max_length")\n'
        'st.number_input("Seed", 0, 10, SEED.default, key="pos_probe_seed")\n'
        'st.slider("k", 1.0, 8.0, 3.0, 0.5, key="ln_k")\n'
        'st.slider("Texts", 1, 9, 4, key="quant_n_texts")\n'
    )
    assert [key for _, key in _literal_defaults(planted, _link_keys())] == [
        "massive_max_length",
        "ln_k",
    ]


def _declared_variables() -> set[str]:
    return {where.rsplit(".", 1)[1] for where in DECLARATIONS} | {
        "LLM_INT8_THRESHOLD",
        "TOKEN_SHARE",
        "SITE_SHARE",
        "MASSIVE_ABS_THRESHOLD",
        "MASSIVE_MEDIAN_RATIO",
    }


def _copies_a_default(value: ast.expr, names: set[str]) -> bool:
    """``X.default`` or ``int(X.default)`` / ``float(X.default)`` of a declaration ``X``."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and len(value.args) == 1:
        if value.func.id in ("int", "float"):
            value = value.args[0]
    return (
        isinstance(value, ast.Attribute)
        and value.attr == "default"
        and isinstance(value.value, ast.Name)
        and value.value.id in names
    )


def test_a_declaration_has_one_name():
    """No ``OTHER = DECLARATION`` (nor ``OTHER = ALIAS`` of one), no module constant copying a
    declaration's default and no ``import DECLARATION as OTHER`` in backend/, ui/ or pages/."""
    names = _declared_variables()
    assigns, found = [], []
    for path in sorted((ROOT / "backend").rglob("*.py")) + _page_sources():
        where = path.relative_to(ROOT)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [
            f"{where}:{node.lineno} {node.targets[0].id} = {ast.unparse(node.value)}"
            for node in tree.body  # module constants: DEFAULT_X = X.default, int(X.default)
            if isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and _copies_a_default(node.value, names)
        ]
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
                assigns += [
                    (f"{where}:{node.lineno}", t.id, node.value.id)
                    for t in node.targets
                    if isinstance(t, ast.Name)
                ]
            if isinstance(node, ast.ImportFrom):
                found += [
                    f"{where}:{node.lineno} {a.name} as {a.asname}"
                    for a in node.names
                    if a.name in names and a.asname and a.asname != a.name
                ]
    grown = True
    while grown:  # aliases of aliases
        new = {target for _, target, value in assigns if value in names} - names
        names |= new
        grown = bool(new)
    found += [f"{at} {target} = {value}" for at, target, value in assigns if value in names]
    assert found == [], found
