"""``isoscope cache --info | --clear [--models]``: the extraction cache's use, or empty it.

``--info`` prints "1.2 of 5 GiB (results ...)" to stderr and, with ``--out``, the numbers as JSON.
``--clear`` removes every cached result (files being written are left alone); ``--models`` also
removes converted model folders (they are rebuilt from their source on next use).
"""

from __future__ import annotations

import argparse

from isoscope.commands.common import add_cache_args, check_out_path, progress_line, write_json


def apply_cache_args(args: argparse.Namespace):
    """Set the process's cache limit from ``--cache-limit`` and return the ResultCache to use."""
    from isoscope.engine.store.cache import ResultCache
    from isoscope.engine.store.limit import set_process_limit

    if getattr(args, "cache_limit", None) is not None:
        set_process_limit(args.cache_limit)
    return ResultCache(getattr(args, "cache_dir", None))


def add_parser(sub) -> None:
    p = sub.add_parser("cache", help="show the extraction cache's size, or clear it")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--info", action="store_true", help="print the cache's use and limit")
    action.add_argument("--clear", action="store_true", help="remove every cached result")
    p.add_argument(
        "--models",
        action="store_true",
        help="with --clear: also remove converted model folders (models/)",
    )
    p.add_argument("--out", default=None, help="also write the numbers as JSON to this file")
    add_cache_args(p, no_cache=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from isoscope.engine.errors import InputError
    from isoscope.engine.store.limit import format_size

    out = check_out_path(args.out) if args.out else None
    if args.models and not args.clear:
        raise InputError("--models only goes with --clear")
    cache = apply_cache_args(args)
    if args.info:
        usage = cache.usage()
        progress_line(f"cache {usage.root}: {usage.summary()}")
        payload = {"action": "info", **usage.to_dict()}
    else:
        count, freed = cache.clear(include_models=args.models)
        usage = cache.usage()
        progress_line(f"cleared {count} entries ({format_size(freed)}) from {usage.root}")
        payload = {"action": "clear", "removed": count, "freed_bytes": freed, **usage.to_dict()}
    if out is not None:
        write_json(out, payload)
    return 0
