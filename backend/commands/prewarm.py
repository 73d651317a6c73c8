"""``isoscope prewarm``: compute the dashboard's first analysis into the disk cache, so the first
visitor (a class of them) finds it ready.

For each model: the bundled corpus with the dashboard's default settings (the first position left
out on causal models, as the sidebar starts), written to the result cache under the key the
dashboard looks up. ``isoscope serve`` runs it in the background at start (``--prewarm``, on by
default for the default model). A key another process is already computing is waited for, not
computed twice (:meth:`isoscope.engine.store.cache.ResultCache.key_lock`).
"""

from __future__ import annotations

import argparse
import time

from isoscope.commands.common import (
    add_cache_args,
    add_model_args,
    check_cache_args,
    load_model_from_args,
    progress_line,
)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "prewarm", help="compute the dashboard's default analysis into the disk cache"
    )
    add_model_args(p)
    p.add_argument(
        "--models",
        dest="model",
        help="several comma-separated sources instead of one --model, e.g. default,smollm2",
    )
    add_cache_args(p, no_cache=False)
    p.set_defaults(func=run)


def models_of(text: str) -> list[str]:
    from isoscope.engine.errors import InputError

    models = [m.strip() for m in text.split(",") if m.strip()]
    if not models:
        raise InputError("--prewarm/--model needs at least one model, e.g. default or smollm2")
    return models


def run(args: argparse.Namespace) -> int:
    """Extract the bundled corpus on each model into the cache, with the dashboard's defaults."""
    from isoscope.engine.extraction import ExtractionSettings
    from isoscope.engine.inputs.corpus import bundled_corpus
    from isoscope.engine.store.cache import ResultCache
    from isoscope.engine.store.cached_extract import cached_extract

    check_cache_args(args)
    cache = ResultCache(args.cache_dir, args.cache_limit)
    for source in models_of(args.model):
        started = time.perf_counter()
        loaded = load_model_from_args(args, source=source)
        settings = ExtractionSettings(
            max_length=args.max_length,
            batch_size=args.batch_size,
            exclude_first=loaded.info.is_causal,  # as the sidebar starts for a causal model
        )
        cached_extract(loaded, bundled_corpus(), settings, None, cache)
        seconds = time.perf_counter() - started
        progress_line(f"prewarm: {source} ready in the cache ({seconds:.1f} s)")
    return 0
