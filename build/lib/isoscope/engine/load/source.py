"""The model-source grammar, parsed once: :func:`parse_source` turns the ``--model`` / sidebar /
link string into a typed :class:`ModelSource`.

Kinds (``ModelSource.kind``):

- ``preset``: a bundled model by name (:data:`PRESETS`: ``default``, ``smollm2``);
- ``random``: ``random:FAMILY[:key=value,...]``, a random-init model of a family in
  :data:`RANDOM_FAMILIES` (their facts in one table) with options :data:`RANDOM_KEYS`;
- ``random-like``: ``random-like:SOURCE``, a random-init copy of SOURCE's architecture (``base``);
- ``gguf``: a path ending in ``.gguf``;
- ``folder``: a path that exists (or that cannot be a Hub id: then it is a mistyped path);
- ``hub``: a Hugging Face Hub id ``name`` or ``org/name``, optionally pinned with ``@revision``
  (a branch, tag or commit sha), e.g. ``Qwen/Qwen3-0.6B@main``. A revision follows git's rules
  for ref names (:func:`check_revision`): it is a name, never a path, so it cannot point the Hub
  cache lookup outside the cache.

Every number in a ``random:`` source is a finite integer (``init_std``: a finite number) within
its range in :data:`RANDOM_OPTIONS`, checked here, before anything is built.

Parsing reads only whether a path exists; nothing is loaded or downloaded here. Every module
that must know what a source names (the loader, the access rules, links, Ray, the ablation)
asks this one, so the grammar has one home.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from isoscope.engine.errors import ModelLoadError
from isoscope.engine.params import Interval

DEFAULT_SOURCE = "default"
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
SMOLLM2_SOURCE = "smollm2"


@dataclass(frozen=True)
class Preset:
    """A bundled model: its source name, the menu's label, and whether it ships as GGUF."""

    name: str
    label: str
    gguf: bool = False


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(DEFAULT_SOURCE, f"default: {DEFAULT_MODEL_NAME}"),
        Preset(SMOLLM2_SOURCE, "SmolLM2-135M-Instruct (bundled decoder)", gguf=True),
    )
}


@dataclass(frozen=True)
class RandomFamily:
    """What a ``random:FAMILY`` model is, known before it is built (the facts the sidebar and
    the planner need without weights; the loaded model's card still reads them from the model).

    ``builds``: the config it is built from (``bert``, ``gpt2``, ``default``: the bundled model's
    config, ``vit``, ``wav2vec2``); ``positions``: ``learned`` or ``none`` (the table is zeroed
    and frozen); ``max_positions``: the default length (None: read from the built config)."""

    name: str
    builds: str
    label: str
    causal: bool = False
    modality: str = "text"
    positions: str = "learned"
    max_positions: int | None = None


RANDOM_FAMILIES: dict[str, RandomFamily] = {
    f.name: f
    for f in (
        RandomFamily("bert", "bert", "random BERT (4 layers, 256)", max_positions=512),
        RandomFamily(
            "bert-nope",
            "bert",
            "random BERT without position embeddings",
            positions="none",
            max_positions=512,
        ),
        RandomFamily(
            "gpt2", "gpt2", "random GPT-2 (4 layers, 256)", causal=True, max_positions=1024
        ),
        RandomFamily(
            "gpt2-nope",
            "gpt2",
            "random GPT-2 without position embeddings",
            causal=True,
            positions="none",
            max_positions=1024,
        ),
        RandomFamily("default", "default", "random-init copy of the default model's config"),
        RandomFamily("vit", "vit", "random ViT (images: 224 px, 16 px patches)", modality="image"),
        RandomFamily(
            "wav2vec2",
            "wav2vec2",
            "random wav2vec2 (audio: 16 kHz)",
            modality="audio",
            positions="convolutional",
        ),
    )
}
# The options of a random:FAMILY model and the values each accepts (its default where a family
# does not set its own): what a visitor may type is bounded here, before the memory preflight
# (isoscope.engine.load.preflight) weighs the model the options describe.
RANDOM_OPTIONS: dict[str, Interval] = {
    o.name: o
    for o in (
        Interval(1, 64, 4, integer=True, name="layers", help="transformer blocks"),
        Interval(1, 8192, 256, integer=True, name="width", help="hidden size"),
        Interval(1, 128, 4, integer=True, name="heads", help="attention heads"),
        Interval(0, 2**32 - 1, 0, integer=True, name="seed", help="the initialisation's seed"),
        Interval(0, 1, 0.02, name="init_std", help="std of the normal initialisation"),
        Interval(1, 65536, 512, integer=True, name="max_positions", help="position-table rows"),
    )
}
RANDOM_KEYS = tuple(RANDOM_OPTIONS)

RANDOM_PREFIX = "random:"
RANDOM_LIKE_PREFIX = "random-like:"
# org/name, each part letters, digits, '-', '_', '.'; an optional @revision (branch, tag, sha)
_HUB_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*$")
MAX_REVISION_CHARS = 255
# One component of a git ref name: no control characters, space, ~ ^ : ? * [ \ (git check-ref-format)
_REF_PART = re.compile(r"^[^\x00-\x20\x7f~^:?*\[\\]+$")
REVISION_RULES = (
    "a revision is a branch, tag or commit sha (letters, digits, '-', '_', '.', '/' between "
    f"names; no '..', no leading '/' or '.', no spaces; at most {MAX_REVISION_CHARS} characters)"
)


@dataclass(frozen=True)
class ModelSource:
    """One parsed model source; ``text`` is its canonical string (what caches and links carry)."""

    kind: str  # "preset" | "random" | "random-like" | "gguf" | "folder" | "hub"
    text: str
    path: Path | None = None  # folder and gguf
    repo_id: str = ""  # hub
    revision: str | None = None  # hub: None is the default branch
    family: RandomFamily | None = None  # random
    options: tuple[tuple[str, float], ...] = ()  # random, in RANDOM_KEYS order
    base: ModelSource | None = None  # random-like: the model copied

    @property
    def is_random(self) -> bool:
        return self.kind in ("random", "random-like")

    @property
    def is_gguf(self) -> bool:
        """A ``.gguf`` file or the bundled GGUF decoder: converted once to safetensors."""
        return self.kind == "gguf" or (self.kind == "preset" and PRESETS[self.text].gguf)

    @property
    def origin(self) -> ModelSource:
        """The source whose files are read: itself, or what a ``random-like:`` copies."""
        return self.base.origin if self.base is not None else self

    @property
    def option_dict(self) -> dict[str, float]:
        return dict(self.options)

    def causal_hint(self) -> bool | None:
        """Whether the model is causal, when that is known without a config: random families
        from their table, GGUF files (llama.cpp decoders); None when the config must decide."""
        origin = self.origin
        if origin.family is not None:
            return origin.family.causal
        if origin.is_gguf:
            return True
        return None


def parse_source(text: str) -> ModelSource:
    """Parse a model source string (see the module docstring); :class:`ModelLoadError` with the
    accepted forms for a malformed ``random:`` source or an empty string."""
    text = (text or "").strip()
    low = text.lower()
    if not text:
        raise ModelLoadError(
            "no model given; use 'default', a checkpoint folder, a Hub id (org/name[@revision]) "
            "or random:FAMILY"
        )
    if low.startswith(RANDOM_LIKE_PREFIX):
        inner = text[len(RANDOM_LIKE_PREFIX) :].strip()
        if not inner:
            raise ModelLoadError(
                "random-like: needs the model to copy, e.g. random-like:default or "
                "random-like:/path/to/ckpt"
            )
        base = parse_source(inner)
        return ModelSource("random-like", f"{RANDOM_LIKE_PREFIX}{base.text}", base=base)
    if low.startswith(RANDOM_PREFIX):
        family, options = _parse_random(text)
        return ModelSource(
            "random", random_source(family.name, **dict(options)), family=family, options=options
        )
    if low in PRESETS:
        return ModelSource("preset", low)
    path = Path(text).expanduser()
    if low.endswith(".gguf"):
        return ModelSource("gguf", text, path=path)
    if path.exists() or not _could_be_hub_id(text):
        return ModelSource("folder", text, path=path)
    repo_id, _, revision = text.partition("@")
    if not _HUB_ID.match(repo_id) or (revision == "" and "@" in text):
        return ModelSource("folder", text, path=path)  # neither: "does not exist"
    if revision:
        check_revision(revision, repo_id)
    return ModelSource("hub", text, repo_id=repo_id, revision=revision or None)


def revision_problem(revision: str) -> str | None:
    """What makes ``revision`` not a git ref name (a branch, tag, ``refs/pr/1`` or a commit sha),
    or None when it is one. A path (``/etc``, ``../x``, ``a\\b``) is never a ref name."""
    if len(revision) > MAX_REVISION_CHARS:
        return f"it is {len(revision)} characters long"
    if revision.startswith("/") or revision.endswith("/") or "//" in revision:
        return "it starts or ends with '/' or has an empty part"
    if ".." in revision or "@{" in revision:
        return "it holds '..' or '@{'"
    for part in revision.split("/"):
        if part.startswith(".") or part.endswith(".lock") or not _REF_PART.match(part):
            return f"{part!r} is not a name git accepts"
    if revision.endswith("."):
        return "it ends with '.'"
    return None


def check_revision(revision: str, repo_id: str = "") -> str:
    """``revision`` when it is a git ref name, else :class:`ModelLoadError` in one line."""
    problem = revision_problem(revision)
    if problem is None:
        return revision
    shown = revision if len(revision) <= 60 else revision[:60] + "..."
    shown = shown.encode("unicode_escape").decode("ascii")  # control characters stay visible
    where = f" of {repo_id!r}" if repo_id else ""
    raise ModelLoadError(
        f"revision {shown!r}{where} is not a branch, tag or commit ({problem}); {REVISION_RULES}; "
        "or drop @revision for the default branch"
    )


def _could_be_hub_id(text: str) -> bool:
    """Hub ids are "name" or "org/name" (plus "@revision"); paths start with '.', '/', '~'."""
    repo_id = text.partition("@")[0]
    return not text.startswith((".", "/", "~", "\\")) and repo_id.count("/") <= 1


def _parse_random(text: str) -> tuple[RandomFamily, tuple[tuple[str, float], ...]]:
    """``random:gpt2-nope:layers=4,width=64`` -> (gpt2-nope's row, (("layers", 4), ("width", 64)))."""
    body = text.split(":", 1)[1]
    name, _, opts = body.partition(":")
    family = RANDOM_FAMILIES.get(name.strip().lower())
    if family is None:
        raise ModelLoadError(
            f"unknown random model family {name.strip().lower()!r}; use random:FAMILY with FAMILY "
            f"one of {', '.join(RANDOM_FAMILIES)} (e.g. random:bert:layers=4,width=256,heads=4,seed=0)"
        )
    options: dict[str, float] = {}
    for item in filter(None, (p.strip() for p in opts.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq or key not in RANDOM_KEYS:
            raise ModelLoadError(
                f"bad random-model option {item!r}; options are key=value with key one of "
                f"{', '.join(RANDOM_KEYS)}"
            )
        options[key] = random_option(key, value.strip())
    return family, tuple((k, options[k]) for k in RANDOM_KEYS if k in options)


def random_option(key: str, value: str) -> float:
    """The number ``value`` of the ``random:`` option ``key``: finite, an integer unless the
    option is ``init_std``, and within :data:`RANDOM_OPTIONS`; else :class:`ModelLoadError`
    naming the accepted range (``nan``, ``inf``, ``1e400``, ``-1`` and ``2.5`` layers included)."""
    declared = RANDOM_OPTIONS[key]
    kind = "an integer" if declared.integer else "a finite number"
    accepted = (
        f"random-model option {key} needs a number: {kind} from {_bound(declared.low)} to "
        f"{_bound(declared.high)}, got {value[:40]!r}"
    )
    try:
        number = float(value)
        if re.fullmatch(r"[+-]?\d+", value):
            number = int(value)  # exact, however many digits
    except ValueError:
        raise ModelLoadError(accepted) from None
    if not math.isfinite(number) or (declared.integer and not float(number).is_integer()):
        raise ModelLoadError(accepted)
    if not declared.low <= number <= declared.high:
        raise ModelLoadError(accepted)
    return int(number) if declared.integer else float(number)


def _bound(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def random_source(family: str, **options: float) -> str:
    """The canonical ``random:`` string of ``family`` and ``options`` (keys in a stable order)."""
    opts = ",".join(f"{k}={options[k]}" for k in RANDOM_KEYS if k in options)
    return f"{RANDOM_PREFIX}{family}" + (f":{opts}" if opts else "")


def is_random_like(source: str) -> bool:
    """Whether ``source`` names a random-init copy (``random-like:SOURCE``)."""
    return (source or "").strip().lower().startswith(RANDOM_LIKE_PREFIX)


def random_like_source(source: str) -> str:
    """``random-like:SOURCE`` for ``source``, unchanged when it already is one."""
    if is_random_like(source):
        return source.strip()
    try:
        return f"{RANDOM_LIKE_PREFIX}{parse_source(source).text}"
    except ModelLoadError:  # malformed: loading the copy gives the message
        return f"{RANDOM_LIKE_PREFIX}{(source or '').strip()}"


def source_label(source: str) -> str:
    """The menu label of a preset, a bare ``random:FAMILY`` or ``random-like:`` of a preset."""
    parsed = parse_source(source)
    if parsed.kind == "preset":
        return PRESETS[parsed.text].label
    if parsed.kind == "random" and parsed.family is not None:
        return parsed.family.label
    if parsed.base is not None and parsed.base.kind == "preset":
        return f"random-init copy of the {parsed.base.text} model"
    return parsed.text
