"""The extraction through the disk cache (:func:`cached_extract`): a hit is read back, a miss is
computed once across processes (:meth:`isoscope.engine.store.cache.ResultCache.key_lock`), kept,
and its measured speed recorded for the next estimate (:mod:`isoscope.engine.budget.throughput`)."""

from __future__ import annotations

from isoscope.engine.budget import throughput
from isoscope.engine.budget.batching import Batching, padded_tokens
from isoscope.engine.extraction import ExtractionResult, ExtractionSettings
from isoscope.engine.store.cache import ResultCache
from isoscope.engine.store.entries import cache_key
from isoscope.engine.store.provenance import attribute


def cached_extract(
    loaded, corpus, settings=None, progress=None, cache: ResultCache | None = None
) -> ExtractionResult:
    """:func:`isoscope.engine.extraction.extract` through the disk cache (``cache=None`` uses the default).

    When nothing could be kept (see :meth:`ResultCache.put`) the result carries one notice saying so.
    A hit computed from another path with identical weights names ``loaded`` in its model card
    (:func:`isoscope.engine.store.provenance.attribute`), with one line saying where the statistics came from."""
    from isoscope.engine.extraction import extract

    settings = settings or ExtractionSettings()
    cache = cache if cache is not None else ResultCache()
    key = cache_key(loaded.fingerprint, corpus.sha, settings)
    hit = cache.load(key)
    if hit is None:
        # Another process (a second server, the prewarm, the CLI) computing this key: wait for it
        # and read its result instead of computing it again.
        with cache.key_lock(key):
            hit = cache.load(key)
            if hit is None:
                result = extract(loaded, corpus, settings, progress)
                _record_throughput(cache, loaded, corpus, result)
                return cache.put(key, result)
    if progress is not None:
        progress(len(corpus), len(corpus))
    return attribute(hit, loaded.info.to_dict())


def _record_throughput(cache: ResultCache, loaded, corpus, result: ExtractionResult) -> None:
    """This run's measured speed per padded token, kept beside the results for the next estimate
    (text only: an image or clip's token count is the model's, not the corpus's), and the
    phases its load measured (:func:`isoscope.engine.budget.throughput.record_phases`)."""
    throughput.record_phases(cache.root, loaded)
    if getattr(corpus, "kind", "text") != "text" or not result.seconds:
        return
    counts = throughput.token_counts(loaded.tokenizer, corpus.texts, result.settings.max_length)
    throughput.record_extraction(
        cache.root,
        throughput.device_key(loaded.device),
        throughput.parameter_count(loaded.model),
        padded_tokens(counts, Batching.of(result.settings)),
        result.seconds,
    )
