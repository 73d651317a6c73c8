"""A feature's Neuronpedia page (neuronpedia.org: one page per feature of many released SAEs).

Neuronpedia's ids for a release cannot be read from the SAE's files, so a small table maps the
Hub paths of known releases to them: Gemma Scope 2's residual-stream SAEs (the ``l0_medium``
ones, which Neuronpedia hosts) and Gemma Scope's residual-stream SAEs (Neuronpedia hosts one
L0 per layer and width: another L0 of the same width opens its closest page or none).
"""

from __future__ import annotations

import re

NEURONPEDIA = "https://www.neuronpedia.org"

# (pattern over "org/name/path/in/repo", Neuronpedia's model/SAE id template)
KNOWN_RELEASES = (
    (
        re.compile(
            r"^google/gemma-scope-2-(?P<size>\d+[mb])-(?P<variant>pt|it)/resid_post/"
            r"layer_(?P<layer>\d+)_width_(?P<width>\d+[km])_l0_medium/?$"
        ),
        "gemma-3-{size}{it}/{layer}-gemmascope-2-res-{width}",
    ),
    (
        re.compile(
            r"^google/gemma-scope-(?P<size>\d+b)-pt-res/layer_(?P<layer>\d+)/"
            r"width_(?P<width>\d+[km])/average_l0_\d+/?$"
        ),
        "gemma-2-{size}/{layer}-gemmascope-res-{width}",
    ),
)


def neuronpedia_id(source: str) -> str | None:
    """Neuronpedia's id of the SAE a Hub source names (``org/name[@rev]/path``), or None."""
    repo_path = re.sub(r"@[^/:]+", "", source.strip()).replace(":", "/", 1)
    for pattern, template in KNOWN_RELEASES:
        if m := pattern.match(repo_path):
            groups = m.groupdict()
            groups["it"] = "-it" if groups.get("variant") == "it" else ""
            return template.format(**groups)
    return None


def feature_url(source: str, feature: int, known: str | None = None) -> str | None:
    """The Neuronpedia page of ``feature`` of the SAE ``source`` (``known``: its Neuronpedia id
    when SAELens's directory gave it), or None when not known."""
    found = known or neuronpedia_id(source)
    return f"{NEURONPEDIA}/{found}/{int(feature)}" if found else None
