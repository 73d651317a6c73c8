"""The extraction on a Ray cluster (Ray Data): the same :class:`ExtractionResult` as one process.

``isoscope analyze ... --engine ray [--ray-address local|auto|ADDRESS] [--workers N]
[--gpus-per-worker G]`` runs :func:`run_ray_extraction`:

1. The corpus (a .txt/.csv/.jsonl/.parquet file or a folder of such shards) is read as a Ray
   dataset: one row per file (``ray.data.read_binary_files``), each parsed on a worker by the
   same parser as the local engine (:func:`isoscope.engine.inputs.corpus.texts_from_bytes`). The driver orders
   the shards by sorted path and numbers the texts, so text indices (and therefore the token
   sample) never depend on how many workers read them.
2. The texts become a dataset of ``(text_id, text)`` rows, one block per shard (uneven blocks are
   fine), and ``map_batches`` sends chunks of texts to a fixed pool of actors
   (``compute=ray.data.ActorPoolStrategy(size=N)``, the API of the pinned Ray 2.60; the older
   ``concurrency=`` argument is deprecated there). Each actor loads the model once, on its GPU
   (``num_gpus=G``) or CPU, and returns per-chunk partial statistics and sample candidates,
   never hidden states.
   Images and audio clips (``--images`` / ``--audio``): the driver reads the folder as the local
   engine does (same limits and notices), plans the batches with the model's layout, and ships
   each chunk's decoded items to the actors.
3. The driver merges the partials as they arrive (Chan et al.'s parallel update, exact to float64
   rounding; see docs/methods.md section 9) and finishes the result exactly as the local engine does.

Faults: a worker killed mid-run costs time, not exactness
(:mod:`isoscope.engine.extraction.ray_pool` restarts it and retries its chunk). A local instance
started here is shut down in ``finally`` (Ctrl-C included); a cluster we only connected to is left
running. An unreachable address fails in seconds with one
:class:`isoscope.engine.extraction.ray_cluster.RayEngineError` line, because ``ray.init`` itself
would retry for minutes.

The parts: :mod:`isoscope.engine.extraction.ray_cluster` (the options, the session, the pool's
size), :mod:`isoscope.engine.extraction.ray_plan` (the corpus dataset and the chunks) and
:mod:`isoscope.engine.extraction.ray_pool` (the workers and the merge); this module runs them in
order.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, cast

from isoscope.engine.budget.progress import Progress
from isoscope.engine.extraction import ray_cluster
from isoscope.engine.extraction.ray_cluster import ModelSpec, RayOptions, pool_size
from isoscope.engine.extraction.ray_plan import is_media_corpus, plan_chunks, read_corpus
from isoscope.engine.extraction.ray_pool import run_pool, sample_is_complete
from isoscope.engine.inputs.corpus import Corpus


def run_ray_extraction(
    spec: ModelSpec,
    corpus: Corpus | str | Path,
    settings: Any = None,
    options: RayOptions | None = None,
    progress: Progress | None = None,
    *,
    batch_delay_s: float = 0.0,
    download_progress: Progress | None = None,
) -> Any:
    """The :class:`ExtractionResult` of ``spec`` on ``corpus``, computed on Ray (module doc).

    ``corpus`` is a :class:`Corpus` or a path (file or folder of shards) read as a Ray dataset,
    or images / clips (a :class:`isoscope.engine.inputs.media.MediaCorpus` the driver has read), which
    the workers receive decoded.
    Equals :func:`isoscope.engine.extraction.extract` on the same corpus and settings: statistics to float64
    rounding, the token sample exactly. ``batch_delay_s`` is for fault-injection tests only.

    A Hub id not in the cache is downloaded here, on the driver, before Ray starts
    (:func:`isoscope.engine.load.hub.fetch`, reporting bytes to ``download_progress``, under
    ``spec.quota_bytes``): the planning reads its tokenizer, and workers that share the
    driver's Hugging Face cache find it there instead of each fetching it.
    """
    from isoscope.engine.extraction import ExtractionSettings
    from isoscope.engine.load import hub

    if (remote := hub.to_download(spec.source)) is not None:
        hub.fetch(
            remote,
            allow_pickle=spec.allow_pickle,
            progress=download_progress,
            quota_bytes=spec.quota_bytes,
        )

    settings = settings or ExtractionSettings()
    options = options or RayOptions()
    started = time.perf_counter()
    with ray_cluster.ray_session(options) as ray:
        if not isinstance(corpus, Corpus) and not is_media_corpus(corpus):
            corpus = read_corpus(ray, corpus)
        corpus = cast(Corpus, corpus)  # read, or a Corpus / MediaCorpus (its stand-in) as given
        workers = pool_size(ray, options)
        plan = plan_chunks(spec, corpus, settings, workers)
        partial = run_pool(
            ray, spec, corpus, settings, options, workers, plan, progress, batch_delay_s
        )
        if not sample_is_complete(partial, plan.threshold):
            # the driver's tokenization disagreed with the workers' (it never should): rerun
            # keeping every candidate rather than return a different sample
            plan = dataclasses.replace(plan, threshold=None)
            partial = run_pool(
                ray, spec, corpus, settings, options, workers, plan, progress, batch_delay_s
            )
    from isoscope.engine.extraction import finish

    partial.notices[:0] = [n for n in plan.notes if n not in partial.notices]  # as extract() does
    result = finish(partial, corpus, seconds=time.perf_counter() - started)
    extra = dict(result.extra)
    extra["engine"] = {
        "name": "ray",
        "workers": workers,
        "gpus_per_worker": options.gpus_per_worker,
        "address": options.address or "connected",
    }
    return dataclasses.replace(result, extra=extra)
