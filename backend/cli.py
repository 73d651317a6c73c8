"""Command-line interface: ``python -m backend COMMAND ...``.

Every command writes JSON to ``--out`` and progress to stderr. Any user error prints one line,
``error: <what is wrong and what to do>``, and exits with status 2; never a traceback.
Subcommands live in ``backend/commands/<name>.py``, each exposing ``add_parser(subparsers)``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from backend.environment import use_offline_environment
from backend.errors import IsoscopeError

COMMAND_MODULES = (
    "analyze",
    "sts",
    "ablate",
    "positional",
    "cache",
    "report",
    "export",
    "massive",
    "compare",
    "trajectory",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse's own convention)
        sys.stderr.write(f"error: {message} (see --help)\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m backend", description="isoscope: embedding geometry of Transformer models"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"backend.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"backend.commands.{name}":
                continue
            raise
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    use_offline_environment()
    quiet_libraries()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except IsoscopeError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 130
    except MemoryError:
        sys.stderr.write(
            "error: out of memory; lower --batch-size, --max-length or the number of texts\n"
        )
        return 2
    except Exception as exc:  # a bug: still one line, with a hint to report it
        sys.stderr.write(
            f"error: internal error ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); please report it\n"
        )
        return 1


def quiet_libraries() -> None:
    """Silence transformers' progress bars and warnings; isoscope reports its own progress."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except Exception:
        pass


# ----------------------------------------------------------------------------- shared helpers


def add_model_args(
    parser: argparse.ArgumentParser, *, max_length: int = 128, batch_size: int = 32
) -> None:
    parser.add_argument(
        "--model",
        default="default",
        help="default | smollm2 (bundled decoder) | file.gguf | checkpoint folder | cached Hub id | "
        "random:FAMILY[:k=v,...] | random-like:SOURCE (random-init copy of SOURCE's architecture)",
    )
    parser.add_argument(
        "--device", default="auto", help="auto (CUDA, then MPS, then CPU) | cpu | cuda | mps"
    )
    parser.add_argument("--dtype", default="float32", help="float32 | bfloat16 (GPU only)")
    parser.add_argument(
        "--device-map",
        default=None,
        choices=["auto"],
        help="auto: spread a checkpoint too big for one GPU over the GPUs, then CPU RAM (accelerate)",
    )
    parser.add_argument(
        "--allow-pickle",
        action="store_true",
        help="allow pickle .bin weights (only for files you trust)",
    )
    parser.add_argument(
        "--max-length", type=int, default=max_length, help="tokens per text (longer texts are cut)"
    )
    parser.add_argument("--batch-size", type=int, default=batch_size)


def load_model_from_args(args: argparse.Namespace, head: str = "base"):
    from backend.models import load_model

    # No "loading ..." line before the load: a refused model must leave exactly one line on stderr.
    loaded = load_model(
        args.model,
        device=args.device,
        dtype=args.dtype,
        allow_pickle=args.allow_pickle,
        head=head,
        device_map=getattr(args, "device_map", None),
    )
    progress_line(
        f"model: {loaded.info.display_name} · {loaded.info.num_layers} "
        f"layers · width {loaded.info.hidden_size} · {loaded.info.device}"
    )
    return loaded


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
    from backend.cache import parse_size

    if getattr(args, "cache_limit", None) is not None:
        parse_size(args.cache_limit, "--cache-limit")


def extract_with_cache(loaded, corpus, settings, args: argparse.Namespace, label: str = ""):
    """The extraction through the disk cache (``--cache-dir``/``--cache-limit``) unless
    ``--no-cache``, with a progress line on stderr."""
    from backend.cache import ResultCache, cached_extract
    from backend.extract import extract

    progress = ProgressPrinter(f"{label + ': ' if label else ''}extracting {len(corpus)} texts")
    if getattr(args, "no_cache", False):
        return extract(loaded, corpus, settings, progress)
    cache = ResultCache(getattr(args, "cache_dir", None), getattr(args, "cache_limit", None))
    return cached_extract(loaded, corpus, settings, progress, cache)


def check_out_path(out: str) -> Path:
    path = Path(out)
    if path.is_dir():
        raise IsoscopeError(f"--out {out!r} is a folder; give a file name such as out.json")
    if not path.parent.exists():
        raise IsoscopeError(f"--out: folder {str(path.parent)!r} does not exist")
    return path


def progress_line(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


class ProgressPrinter:
    """A ``progress(done, total)`` callback that prints at most every half second to stderr."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - self.last > 0.5:
            self.last = now
            sys.stderr.write(f"\r{self.label}: {done}/{total}")
            if done >= total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def to_jsonable(value: Any) -> Any:
    """numpy scalars/arrays to Python; NaN and inf to None (strict JSON)."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(path: Path, payload: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(to_jsonable(payload), indent=1))
    os.replace(tmp, path)
    progress_line(f"wrote {path}")
