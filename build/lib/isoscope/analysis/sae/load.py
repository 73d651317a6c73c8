"""An SAE source resolved to its weights, the way models load.

A source is a local folder (or a file in it) holding one SAE, or a Hub id plus the SAE's path in
the repo: ``org/name[@revision]/path/in/repo`` (or ``org/name[@revision]:path/in/repo``), e.g.
``google/gemma-scope-2-270m-pt/resid_post/layer_12_width_16k_l0_medium``, or SAELens's name for it
(``saelens:RELEASE:SAE_ID``, :mod:`isoscope.analysis.sae.directory`). Hub files come through
:func:`isoscope.engine.load.hub.fetch_files`, with the models' rules: ``HF_HUB_OFFLINE`` reads the
cache only, gated repos say how to get access, downloads resume, and only the SAE's own
safetensors and JSON files are fetched (never pickle).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, replace
from pathlib import Path

from isoscope.analysis.sae.directory import PREFIX, resolve_release
from isoscope.analysis.sae.formats import (
    GEMMA_SCOPE_FILE,
    REFUSED_SUFFIXES,
    SparseAutoencoder,
    read_folder,
)
from isoscope.analysis.sae.neuronpedia import neuronpedia_id
from isoscope.engine.budget.progress import Progress
from isoscope.engine.errors import InputError, ModelLoadError
from isoscope.engine.load.source import ModelSource, parse_source

WEIGHT_FILES = (GEMMA_SCOPE_FILE, "sae_weights.safetensors", "sae.safetensors")
SAE_SOURCES = (
    "a local folder holding one SAE, a Hub id plus the SAE's path in the repo "
    "(org/name[@revision]/path/in/repo), or saelens:RELEASE:SAE_ID where SAELens is installed"
)


@dataclass(frozen=True)
class SaeSource:
    """A parsed SAE source; ``text`` is its canonical form (what caches and links carry)."""

    kind: str  # "folder" | "hub"
    text: str
    path: Path | None = None  # folder
    repo: ModelSource | None = None  # hub: the repo (and revision)
    inside: str = ""  # hub: the SAE's path in the repo
    neuronpedia: str | None = None  # Neuronpedia's id, when SAELens's directory names it


def parse_sae_source(text: str) -> SaeSource:
    """Parse an SAE source (module doc); :class:`InputError` naming the accepted forms."""
    text = (text or "").strip()
    if not text:
        raise InputError(f"no SAE given; give {SAE_SOURCES}")
    if text.startswith(PREFIX):
        release = resolve_release(text)
        return SaeSource(
            "hub",
            f"{release.repo_id}/{release.path}",
            repo=parse_source(release.repo_id),
            inside=release.path.strip("/"),
            neuronpedia=release.neuronpedia,
        )
    path = Path(text).expanduser()
    if path.exists() or text.startswith((".", "/", "~")):
        return SaeSource("folder", text, path=path)
    if ":" in text:
        repo_text, _, inside = text.partition(":")
    else:
        parts = text.split("/")
        repo_text, inside = "/".join(parts[:2]), "/".join(parts[2:])
    inside = inside.strip("/")
    try:
        repo = parse_source(repo_text)
    except ModelLoadError:
        repo = None
    if repo is None or repo.kind != "hub" or "/" not in repo.repo_id or not inside:
        raise InputError(f"no SAE at {text!r}: give {SAE_SOURCES}")
    revision = f"@{repo.revision}" if repo.revision else ""
    return SaeSource("hub", f"{repo.repo_id}{revision}/{inside}", repo=repo, inside=inside)


def load_sae(
    source: str | SaeSource,
    *,
    progress: Progress | None = None,
    quota_bytes: int | None = None,
) -> SparseAutoencoder:
    """The SAE ``source`` names, float32 on the CPU (:class:`ModelLoadError` or
    :class:`InputError` with one actionable line for anything wrong)."""
    parsed = source if isinstance(source, SaeSource) else parse_sae_source(source)
    if parsed.kind == "folder":
        assert parsed.path is not None  # a folder source carries its path
        if not parsed.path.exists():
            raise InputError(f"no SAE at {parsed.text!r}: the folder does not exist")
        return read_folder(parsed.path, source=parsed.text)
    from isoscope.engine.load import hub

    assert parsed.repo is not None  # a hub source carries its repo
    snapshot = hub.fetch_files(
        parsed.repo,
        lambda files: sae_files(files, parsed),
        lambda folder: _holds_sae(folder / parsed.inside),
        progress=progress,
        quota_bytes=quota_bytes,
    )
    sae = read_folder(
        snapshot / parsed.inside,
        path_hint=f"{parsed.repo.repo_id}/{parsed.inside}",
        source=parsed.text,
    )
    return replace(sae, neuronpedia_id=parsed.neuronpedia or neuronpedia_id(parsed.text) or "")


def sae_files(files: dict[str, int], source: SaeSource) -> list[str]:
    """The repo's files (name -> size) an SAE at ``source.inside`` needs: the safetensors and
    JSON files in its folder (the file itself and those beside it, when it names a file).
    Pickle and numpy files are never chosen; a folder holding only those is refused."""
    inside = source.inside
    folder = inside.rsplit("/", 1)[0] if inside in files else inside
    beside = [n for n in files if n.rsplit("/", 1)[0] == folder and "/" in n]
    chosen = sorted(n for n in beside if n.endswith((".safetensors", ".json")))
    if any(n.endswith(".safetensors") for n in chosen):
        return chosen
    refused = sorted(n for n in beside if n.lower().endswith(REFUSED_SUFFIXES))
    if refused:
        raise ModelLoadError(
            f"the SAE at {source.text!r} ships only {refused[0].rsplit('/', 1)[-1]} (pickle or "
            "numpy), which isoscope never reads; nothing was downloaded. Pick an SAE with "
            "safetensors files"
        )
    examples = sorted(
        {n.rsplit("/", 1)[0] for n in files if "/" in n and fnmatch.fnmatch(n, "*.safetensors")}
    )[:3]
    hint = f" (SAE folders there: {', '.join(examples)})" if examples else ""
    assert source.repo is not None  # only a hub source's files are chosen
    raise ModelLoadError(
        f"Hub repo {source.repo.repo_id!r} has no SAE at {inside!r}{hint}: give the folder that "
        "holds params.safetensors, sae_weights.safetensors or sae.safetensors"
    )


def _holds_sae(folder: Path) -> bool:
    if folder.is_file():
        folder = folder.parent
    return folder.is_dir() and any((folder / name).is_file() for name in WEIGHT_FILES)


@dataclass(frozen=True)
class SaeOnModel:
    """An SAE checked against a model: the isoscope state it reads and the notes that go with
    it (the SAE itself on the model's device)."""

    sae: SparseAutoencoder
    state: int
    state_name: str
    notes: tuple[str, ...] = ()


def on_model(sae: SparseAutoencoder, loaded, state: int | None = None) -> SaeOnModel:
    """``sae`` checked against the loaded model: its width must be the model's hidden size and
    its state (``state`` when given, else what its files say) one of the model's; the SAE is
    moved to the model's device. :class:`InputError` in one line otherwise."""
    from isoscope.engine.naming import hidden_state_names

    width = loaded.info.hidden_size
    if sae.d_in != width:
        raise InputError(
            f"the SAE reads vectors of width {sae.d_in} but {loaded.info.display_name} has width "
            f"{width}: pick an SAE trained on this model"
        )
    num_layers = loaded.info.num_layers
    chosen = sae.state if state is None else state
    if chosen is None:
        raise InputError(
            "the SAE's files do not say which hidden state it reads: give the state "
            f"(0 = emb .. {num_layers}; --state in the CLI)"
        )
    if not 0 <= chosen <= num_layers:
        raise InputError(
            f"the SAE reads hidden state {chosen} ({sae.hook or 'as given'}) but "
            f"{loaded.info.display_name} has states 0 (emb) to {num_layers}: pick an SAE trained "
            "on this model"
        )
    notes = []
    if chosen == num_layers and num_layers > 0:
        notes.append(
            f"state {num_layers} is the model's last_hidden_state (after a decoder's final norm); "
            "an SAE on the last block's resid_post was trained before that norm"
        )
    if state is not None and sae.state is not None and state != sae.state:
        notes.append(f"the SAE's files name state {sae.state}; state {state} was read as asked")
    return SaeOnModel(
        sae.to(loaded.device), chosen, hidden_state_names(num_layers)[chosen], tuple(notes)
    )
