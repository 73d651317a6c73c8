"""What every CLI command shares: the model and cache option groups, loading and extracting with
them, the ``--out`` check, progress lines on stderr and strict JSON output."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from isoscope.engine.errors import IsoscopeError
from isoscope.engine.jsonio import strict_json
from isoscope.engine.params import BATCH_SIZE, MAX_LENGTH, Interval

MODEL_SOURCES = (
    "default | smollm2 (bundled decoder) | file.gguf | checkpoint folder | Hub id org/name[@rev] | "
    "random:FAMILY[:k=v,...] | random-like:SOURCE (random-init copy of SOURCE's architecture)"
)


def model_source(text: str) -> str:
    """``--model``'s type: the source as given once :func:`isoscope.engine.load.source.parse_source`
    accepts it, so a malformed source (a revision that is a path, ``random:`` numbers out of
    range) is refused in one line before the corpus is read or anything is loaded."""
    from isoscope.engine.load.source import parse_source

    try:
        parse_source(text)
    except IsoscopeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_model_args(
    parser: argparse.ArgumentParser,
    *,
    max_length: Interval = MAX_LENGTH,
    batch_size: Interval = BATCH_SIZE,
    source: bool = True,
) -> None:
    """The model options of every command that loads a model, in one group: ``--model`` (unless
    ``source=False``, for commands that name their models otherwise), ``--device``, ``--dtype``,
    ``--device-map``, ``--allow-pickle``, and ``--max-length`` / ``--batch-size`` from their
    declarations (the extraction's, or an analysis's own: the same one its page reads)."""
    group = parser.add_argument_group("model")
    if source:
        group.add_argument("--model", default="default", type=model_source, help=MODEL_SOURCES)
    group.add_argument(
        "--device", default="auto", help="auto (CUDA, then MPS, then CPU) | cpu | cuda | mps"
    )
    group.add_argument("--dtype", default="float32", help="float32 | bfloat16 (GPU only)")
    group.add_argument(
        "--device-map",
        default=None,
        choices=["auto"],
        help="auto: spread a checkpoint too big for one GPU over the GPUs, then CPU RAM (accelerate)",
    )
    group.add_argument(
        "--allow-pickle",
        action="store_true",
        help="allow pickle .bin weights (only for files you trust)",
    )
    max_length.add_argument(group)
    batch_size.add_argument(group)


def load_model_from_args(
    args: argparse.Namespace,
    head: str = "base",
    source: str | None = None,
    corpus=None,
    max_length: int = MAX_LENGTH.default,
):
    """The model named by ``source`` (default ``--model``) with the options of
    :func:`add_model_args`. With ``corpus`` (``max_length`` tokens per text), one line on
    stderr before the weights are downloaded or loaded: the first page's estimated time
    (:class:`isoscope.engine.budget.time_estimate.TimeEstimate`)."""
    from isoscope.engine.load.models import load_model

    # No "loading ..." line before the load: a refused model must leave exactly one line on stderr.
    source = args.model if source is None else source
    loaded = load_model(
        source,
        device=args.device,
        dtype=args.dtype,
        allow_pickle=args.allow_pickle,
        head=head,
        device_map=getattr(args, "device_map", None),
        progress=DownloadPrinter(source),
        on_preflight=None if corpus is None else _time_preflight(args, corpus, max_length),
    )
    revision = f" · revision {loaded.info.revision}" if loaded.info.revision else ""
    progress_line(
        f"model: {loaded.info.display_name} · {loaded.info.num_layers} "
        f"layers · width {loaded.info.hidden_size} · {loaded.info.device}{revision}"
    )
    return loaded


def _time_preflight(args: argparse.Namespace, corpus, max_length: int):
    from isoscope.engine.budget import time_estimate
    from isoscope.engine.budget.batching import Batching
    from isoscope.engine.store.cache import ResultCache

    root = ResultCache(getattr(args, "cache_dir", None)).root
    defaults = Batching.of()
    batching = Batching(
        getattr(args, "batch_size", None) or defaults.batch_size,
        getattr(args, "token_budget", None) or defaults.token_budget,
    )

    def show(estimate) -> None:
        progress_line(estimate.describe())
        # what the extraction's progress line reads its first batches against
        args.first_page = (estimate, time.monotonic())

    return time_estimate.time_preflight(root, args.device, corpus, max_length, show, batching)


def _live_correction(args: argparse.Namespace):
    """The :class:`isoscope.engine.budget.progress.LiveCorrection` of the first page announced
    by this command's last load (None when none was announced, or without an extraction
    estimate); used once: a second extraction after the same load is not that first page."""
    from isoscope.engine.budget.progress import LiveCorrection

    announced = getattr(args, "first_page", None)
    args.first_page = None
    if announced is None or announced[0].total_seconds is None:
        return None
    estimate, at = announced
    return LiveCorrection(estimate.total_seconds, time.monotonic() - at, estimate.shares)


class DownloadPrinter:
    """The ``progress(done, total)`` of a Hub download as a stderr line with the rate and ETA,
    at most every half second and only once the download has run half a second (a quick or
    refused download prints nothing, so a refusal stays one line)."""

    def __init__(self, source: str) -> None:
        from isoscope.engine.load.hub import DownloadMeter

        self.source = source
        self.meter = DownloadMeter()
        self.last = self.meter.started
        self.printed = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last > 0.5 or (self.printed and done >= total):
            self.last = now
            self.printed = True
            text = self.meter.describe(done, total)
            sys.stderr.write(f"\rdownloading {self.source}: {text}   ")
            if done >= total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def add_cache_args(parser: argparse.ArgumentParser, *, no_cache: bool = True) -> None:
    """``--cache-dir``, ``--cache-limit`` (and ``--no-cache``): one definition for every command."""
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="result cache folder (default: $ISOSCOPE_CACHE_DIR, else the user cache dir)",
    )
    if no_cache:
        parser.add_argument(
            "--no-cache", action="store_true", help="neither read nor write the result cache"
        )
    parser.add_argument(
        "--cache-limit",
        default=None,
        help="disk cache size limit, e.g. 500M or 5G (default: $ISOSCOPE_CACHE_LIMIT, else 5G); "
        "least recently used results are evicted beyond it",
    )


def check_cache_args(args: argparse.Namespace) -> None:
    """Fail on a malformed ``--cache-limit`` before any model loads."""
    from isoscope.engine.store.limit import parse_size

    if getattr(args, "cache_limit", None) is not None:
        parse_size(args.cache_limit, "--cache-limit")


def extract_with_cache(loaded, corpus, settings, args: argparse.Namespace, label: str = ""):
    """The extraction through the disk cache (``--cache-dir``/``--cache-limit``) unless
    ``--no-cache``, with a progress line on stderr."""
    from isoscope.engine.extraction import extract
    from isoscope.engine.store.cache import ResultCache
    from isoscope.engine.store.cached_extract import cached_extract

    unit = {"text": "texts", "image": "images", "audio": "clips"}[corpus.kind]
    progress = ProgressPrinter(
        f"{label + ': ' if label else ''}extracting {len(corpus)} {unit}", _live_correction(args)
    )
    if getattr(args, "no_cache", False):
        return extract(loaded, corpus, settings, progress)
    cache = ResultCache(getattr(args, "cache_dir", None), getattr(args, "cache_limit", None))
    return cached_extract(loaded, corpus, settings, progress, cache)


def settings_from_args(args: argparse.Namespace, **overrides):
    """The extraction settings every extracting command's options give: ``--max-length``,
    ``--batch-size``, ``--sample-size`` and ``--seed``; ``overrides`` for a command's own
    (``analyze``'s token budget, special tokens and sample budget)."""
    from isoscope.engine.extraction import ExtractionSettings

    fields = {
        "max_length": args.max_length,
        "batch_size": args.batch_size,
        "sample_size": args.sample_size,
        "seed": args.seed,
    }
    return ExtractionSettings(**(fields | overrides))


def print_notices(result) -> None:
    """One ``note:`` line on stderr per notice of an extraction (limits applied, samples cut)."""
    for notice in result.notices:
        progress_line(f"note: {notice}")


def load_and_extract(
    args: argparse.Namespace, corpus, settings, *, exclude_first: bool = True, label: str = ""
):
    """The sequence of every command that analyses one model's extraction: load ``--model``,
    decide ``--exclude-first`` from the loaded model (on by default for causal models; skipped
    with ``exclude_first=False``), extract through the disk cache, print the notices.
    Returns (loaded model, extraction result)."""
    from dataclasses import replace

    loaded = load_model_from_args(args, corpus=corpus, max_length=settings.max_length)
    if exclude_first:
        settings = replace(settings, exclude_first=resolve_exclude_first(args, loaded))
    result = extract_with_cache(loaded, corpus, settings, args, label)
    print_notices(result)
    return loaded, result


def add_input_args(parser: argparse.ArgumentParser, texts_help: str) -> None:
    """``--texts FILE`` | ``--images DIR`` | ``--audio DIR``: exactly one (``demo`` for images or
    audio: the bundled sets, :mod:`isoscope.engine.inputs.media`)."""
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--texts", help=texts_help)
    group.add_argument(
        "--images",
        metavar="DIR",
        help="a folder of .png/.jpg/.webp images (the class is the sub-folder), or 'demo' "
        "(scikit-learn's two sample photos in tiles); for vision models (ViT, DINOv2, CLIP...)",
    )
    group.add_argument(
        "--audio",
        metavar="DIR",
        help="a folder of .wav/.flac clips (mono, resampled to the model's rate), or 'demo' "
        "(sentences read by espeak-ng); for speech models (wav2vec2, HuBERT, the Whisper encoder)",
    )


def load_inputs(args: argparse.Namespace):
    """The corpus ``--texts`` / ``--images`` / ``--audio`` name."""
    from isoscope.engine.inputs.corpus import load_corpus_file
    from isoscope.engine.inputs.media import demo_images, demo_speech, load_media_folder

    if getattr(args, "images", None):
        return demo_images() if args.images == "demo" else load_media_folder(args.images, "image")
    if getattr(args, "audio", None):
        return demo_speech() if args.audio == "demo" else load_media_folder(args.audio, "audio")
    return load_corpus_file(args.texts)


def read_pairs(path: str) -> tuple[list[str], list[str], list[float]]:
    """``--pairs`` CSV (sentence1,sentence2,score) as (sentences A, sentences B, gold scores), for
    the commands that take STS pairs as plain lists (``ablate``, ``report``)."""
    from isoscope.engine.errors import InputError
    from isoscope.engine.inputs.pairs import read_pairs_csv

    if not os.path.lexists(path):
        raise InputError(
            f"--pairs file {path!r} does not exist; give a CSV with sentence1,sentence2,score"
        )
    pairs = read_pairs_csv(Path(path))
    return list(pairs.sentence1), list(pairs.sentence2), list(pairs.scores)


def check_out_path(out: str, flag: str = "--out") -> Path:
    path = Path(out)
    if path.is_dir():
        raise IsoscopeError(f"{flag} {out!r} is a folder; give a file name such as out.json")
    if not path.parent.exists():
        raise IsoscopeError(f"{flag}: folder {str(path.parent)!r} does not exist")
    return path


def deprecated_alias(new_flag: str, why: str) -> type[argparse.Action]:
    """An argparse action for an old spelling of ``new_flag``: it stores the value where
    ``new_flag`` does and says once on stderr which flag to use instead (``why``: what the old
    one means elsewhere)."""

    class DeprecatedAlias(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None) -> None:
            progress_line(f"note: {option_string} is deprecated here, use {new_flag} ({why})")
            setattr(namespace, self.dest, values)

    return DeprecatedAlias


def progress_line(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


class ProgressPrinter:
    """A ``progress(done, total)`` callback that prints at most every half second to stderr.
    With ``correction`` (:class:`isoscope.engine.budget.progress.LiveCorrection`), the first
    batches are read against the announced first page, and a new estimate outside its band is
    said once, on a line of its own."""

    def __init__(self, label: str, correction=None) -> None:
        self.label = label
        self.last = 0.0
        self.correction = correction
        self.started = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        said = (
            None
            if self.correction is None
            else self.correction.check(done, total, now - self.started)
        )
        if said is not None:
            sys.stderr.write(f"\r{self.label}: {done}/{total}\n{said}\n")
            sys.stderr.flush()
        if done >= total or now - self.last > 0.5:
            self.last = now
            sys.stderr.write(f"\r{self.label}: {done}/{total}")
            if done >= total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def write_json(path: Path, payload: dict) -> None:
    """``payload`` as strict JSON (NaN and inf as null), written atomically."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(strict_json(payload, indent=1))
    os.replace(tmp, path)
    progress_line(f"wrote {path}")


EXCLUDE_FIRST = ("auto", "on", "off")


def add_exclude_first_arg(parser: argparse.ArgumentParser) -> None:
    """``--exclude-first auto|on|off``: leave position 0 of every text out of the statistics;
    ``auto`` (the UI's default) is on for causal models, whose first position does not depend on
    the text (the attention sink and its massive activation)."""
    parser.add_argument(
        "--exclude-first",
        choices=EXCLUDE_FIRST,
        default="auto",
        help="leave the first position of every text out: auto = on for causal (decoder) models, "
        "off for encoders (default auto, as in the dashboard)",
    )


def resolve_exclude_first(args: argparse.Namespace, loaded=None) -> bool:
    """``--exclude-first`` as a bool: ``auto`` follows the loaded model's causal flag (or, without
    a loaded model, :func:`isoscope.engine.load.models.source_is_causal`)."""
    choice = getattr(args, "exclude_first", "auto") or "auto"
    if choice != "auto":
        return choice == "on"
    if loaded is not None:
        return bool(loaded.info.is_causal)
    from isoscope.engine.load.models import source_is_causal

    return source_is_causal(args.model)
