"""A first look on a device's very first run: measure on the first batch, then stop at the prefix
that fits the budget (the whole first page: the load, the extraction and the Overview's
statistics, :mod:`isoscope.engine.budget.page_budget`).

With no speed recorded for the device yet (:mod:`isoscope.engine.budget.throughput`), nothing predicts
how long the whole corpus takes. So a first batch of texts (``settings.batch_size``, at most
:data:`~isoscope.engine.budget.page_budget.MIN_FIRST_LOOK_TEXTS`: a full batch of a 1.5B decoder
can take the whole budget on a small CPU) runs as a partial extraction and is timed;
that measured rate sizes the prefix (the batch included) that fits the first look's budget;
the rest of the prefix runs as a second partial, and the two are merged
(:meth:`isoscope.engine.extraction.partial.PartialExtraction.merge`) into the result of the
prefix corpus, stored under the prefix's own cache key. Nothing is computed twice: the first
batch is part of the prefix, and the prefix's length is kept beside the results
(:func:`isoscope.engine.budget.page_budget.remember_first_look`) so the next plan names the same prefix,
whatever the speed recorded since. When the whole corpus fits, the result is the whole
corpus's, under its own key.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from isoscope.engine.budget import page_budget, throughput
from isoscope.engine.budget.batching import Batching, padded_tokens
from isoscope.engine.budget.progress import Progress, report
from isoscope.engine.extraction import ExtractionSettings, extract_partial
from isoscope.engine.extraction.partial import finish
from isoscope.engine.store.cache import ResultCache
from isoscope.engine.store.entries import cache_key


def plan(
    loaded, corpus, counts: Sequence[int], settings: ExtractionSettings, root
) -> page_budget.FirstLook | None:
    """:func:`page_budget.plan_first_look` of ``corpus`` under ``settings``, keeping the prefix
    already chosen for its cache key (by this module or an earlier plan)."""
    key = cache_key(loaded.fingerprint, corpus.sha, settings)
    batching = Batching.of(settings)
    return page_budget.plan_first_look(loaded, corpus, counts, root, key=key, batching=batching)


def measured_first_look(
    loaded,
    corpus,
    counts: Sequence[int],
    settings: ExtractionSettings,
    cache: ResultCache,
    progress: Progress | None = None,
    budget_s: float | None = None,
) -> page_budget.FirstLook | None:
    """Extract ``corpus`` (``counts``: its :func:`throughput.token_counts`) on a device without a
    recorded speed, stopping at the prefix that fits ``budget_s`` (module doc), into ``cache``.
    Returns the :class:`page_budget.FirstLook` whose ``corpus`` is now cached, or None when the
    whole corpus fitted (and is cached under its own key)."""
    budget_s = page_budget.first_look_budget() if budget_s is None else budget_s
    whole_key = cache_key(loaded.fingerprint, corpus.sha, settings)
    started = time.perf_counter()
    parameters = throughput.parameter_count(loaded.model)
    first = min(len(corpus), settings.batch_size, page_budget.MIN_FIRST_LOOK_TEXTS)

    def part(start: int, stop: int, total: int):
        def on_batch(done: int, _total: int) -> bool | None:
            return report(progress, start + done, total)

        ids = np.arange(start, stop)
        return extract_partial(
            loaded, corpus.texts[start:stop], settings, text_ids=ids, progress=on_batch
        )

    batching = Batching.of(settings)
    partial = part(0, first, len(corpus))
    padded = padded_tokens(counts[:first], batching)
    cost = page_budget.PageCost(
        loaded.load_seconds + page_budget.FRAME_SECONDS,  # the page's, beside its tokens
        partial.seconds / max(padded, 1),  # seconds per padded token, measured
        throughput.statistics_seconds_per_token(loaded, cache.root),
        batching,
    )
    n = max(first, page_budget.first_look_size(counts, cost, budget_s))
    target = page_budget.prefix_corpus(corpus, n) if n < len(corpus) else corpus
    if n > first:
        partial.merge(part(first, n, n))
    partial.notices[:0] = list(loaded.layout.notes)
    result = finish(partial, target, seconds=time.perf_counter() - started)
    ran = padded + padded_tokens(counts[first:n], batching)  # the two parts' batches
    throughput.record_phases(cache.root, loaded)
    throughput.record_extraction(
        cache.root,
        throughput.device_key(loaded.device),
        parameters,
        ran,
        partial.seconds,  # the two parts' own times
    )
    cache.put(cache_key(loaded.fingerprint, target.sha, settings), result)
    if target is corpus:
        return None
    page_budget.remember_first_look(cache.root, whole_key, n)
    full = cost.seconds(counts) - cost.fixed_s
    seconds = cost.seconds(counts[:n])
    return page_budget.FirstLook(target, n, len(corpus), full, seconds, budget_s, first_batch=True)
