"""SAELens's release directory, read where SAELens is installed (it is optional, not a
dependency): ``saelens:RELEASE:SAE_ID`` names a released SAE the way SAELens does, e.g.
``saelens:gemma-scope-2-270m-pt-res:layer_12_width_16k_l0_medium``, and resolves to its Hub repo
and path (then loaded by isoscope's own readers) plus its Neuronpedia id.

The directory is SAELens's ``pretrained_saes.yaml``, read as data from the installed package's
folder: SAELens's own modules (and TransformerLens behind them) are never imported.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from isoscope.engine.errors import InputError

PREFIX = "saelens:"
DIRECTORY_FILE = "pretrained_saes.yaml"


@dataclass(frozen=True)
class Release:
    """One SAE of SAELens's directory: its Hub repo, its path there, its Neuronpedia id."""

    repo_id: str
    path: str
    neuronpedia: str | None


@functools.cache
def _directory_file() -> Path | None:
    spec = importlib.util.find_spec("sae_lens")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / DIRECTORY_FILE
        if path.is_file():
            return path
    return None


@functools.cache
def _directory(path: Path) -> dict:
    import yaml

    data = yaml.safe_load(path.read_text())
    return data if isinstance(data, dict) else {}


def resolve_release(text: str) -> Release:
    """``saelens:RELEASE:SAE_ID`` looked up in SAELens's directory; :class:`InputError` in one
    line when SAELens is not installed or the release or SAE is not in it."""
    body = text[len(PREFIX) :] if text.startswith(PREFIX) else text
    release, _, sae_id = body.partition(":")
    if not release or not sae_id:
        raise InputError(f"{text!r}: write saelens:RELEASE:SAE_ID (SAELens's names for an SAE)")
    path = _directory_file()
    if path is None:
        raise InputError(
            "saelens: sources read SAELens's release directory, and SAELens is not installed "
            "(pip install sae-lens); or give the Hub id and path: org/name/path/in/repo"
        )
    directory = _directory(path)
    entry = directory.get(release)
    if not isinstance(entry, dict):
        close = difflib.get_close_matches(release, list(directory), n=3)
        hint = f" (close: {', '.join(close)})" if close else ""
        raise InputError(f"SAELens has no release {release!r}{hint}")
    for sae in entry.get("saes", []):
        if str(sae.get("id")) == sae_id:
            return Release(str(entry["repo_id"]), str(sae["path"]), sae.get("neuronpedia"))
    ids = [str(s.get("id")) for s in entry.get("saes", [])]
    close = difflib.get_close_matches(sae_id, ids, n=3)
    hint = f" (close: {', '.join(close)})" if close else ""
    raise InputError(f"SAELens's release {release!r} has no SAE {sae_id!r}{hint}")
