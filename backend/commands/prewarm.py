"""``isoscope prewarm``: compute the dashboard's first analysis into the disk cache, so the first
visitor (a class of them) finds it ready.

For each model: the bundled corpus with the dashboard's default settings (the first position left
out on causal models, as the sidebar starts), written to the result cache under the key the
dashboard looks up. ``isoscope serve`` runs it in the background at start (``--prewarm``, on by
default for the default model). A key another process is already computing is waited for, not
computed twice (:meth:`backend.engine.cache.ResultCache.key_lock`).
"""

from __future__ import annotations

import argparse
import time

from backend.commands.common import add_cache_args, check_cache_args, progress_line


def add_parser(sub) -> None:
    p = sub.add_parser(
        "prewarm", help="compute the dashboard's default analysis into the disk cache"
    )
    p.add_argument(
        "--model",
        default="default",
        help="comma-separated model sources, e.g. default,smollm2 (default: default)",
    )
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | mps")
    add_cache_args(p, no_cache=False)
    p.set_defaults(func=run)


def models_of(text: str) -> list[str]:
    from backend.engine.errors import InputError

    models = [m.strip() for m in text.split(",") if m.strip()]
    if not models:
        raise InputError("--prewarm/--model needs at least one model, e.g. default or smollm2")
    return models


def prewarm(source: str, device: str = "auto", cache=None) -> float:
    """Extract the bundled corpus on ``source`` into ``cache``; seconds taken."""
    from backend.engine.cache import ResultCache, cached_extract
    from backend.engine.corpus import bundled_corpus
    from backend.engine.extraction import ExtractionSettings
    from backend.engine.models import load_model

    started = time.perf_counter()
    loaded = load_model(source, device=device)
    settings = ExtractionSettings(exclude_first=loaded.info.is_causal)
    cached_extract(loaded, bundled_corpus(), settings, None, cache or ResultCache())
    return time.perf_counter() - started


def run(args: argparse.Namespace) -> int:
    from backend.engine.cache import ResultCache

    check_cache_args(args)
    cache = ResultCache(args.cache_dir, args.cache_limit)
    for source in models_of(args.model):
        seconds = prewarm(source, args.device, cache)
        progress_line(f"prewarm: {source} ready in the cache ({seconds:.1f} s)")
    return 0
