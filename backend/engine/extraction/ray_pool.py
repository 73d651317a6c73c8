"""The Ray engine's workers: the actor that loads the model once and turns chunks into partial
results (:class:`ExtractWorker`), the pool of them that Ray Data runs and whose partials the
driver merges as they arrive (:func:`run_pool`), and the sample cut-off each worker applies
(:func:`below_threshold`, checked by :func:`sample_is_complete`).

Faults: Ray Data restarts a dead actor and retries its chunk (its actor pool runs with
``max_restarts=-1, max_task_retries=-1``), so a worker killed mid-run costs time, not
exactness."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from isoscope.engine.budget.progress import Progress
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction.ray_cluster import ModelSpec, RayEngineError, RayOptions
from isoscope.engine.extraction.ray_plan import Plan, work_dataset
from isoscope.engine.inputs.corpus import Corpus


class ExtractWorker:
    """A Ray Data actor: loads the model once, then turns chunks of ``(text_id, text)`` rows into
    one :class:`isoscope.engine.extraction.PartialExtraction` each (statistics + sample candidates)."""

    def __init__(
        self,
        spec: ModelSpec,
        settings: Any,
        threshold: int | None,
        threads: int = 1,
        batch_delay_s: float = 0.0,
    ) -> None:
        import torch

        from isoscope.engine.environment import quiet_libraries, use_offline_environment
        from isoscope.engine.load.models import load_model

        use_offline_environment()
        quiet_libraries()
        torch.set_num_threads(max(1, threads))
        self.loaded = load_model(
            spec.source, device=spec.device, dtype=spec.dtype, allow_pickle=spec.allow_pickle
        )
        self.settings = settings
        self.threshold = threshold
        self.batch_delay_s = batch_delay_s  # fault-injection tests only: keeps tasks in flight

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import json

        from isoscope.engine.extraction import extract_partial

        if self.batch_delay_s:
            time.sleep(self.batch_delay_s)
        import pickle

        media = "items" in batch
        parts = []
        payloads = batch["items"] if media else batch["texts"]
        for ids_json, payload in zip(batch["text_ids"], payloads, strict=True):
            part = extract_partial(
                self.loaded,
                pickle.loads(bytes(payload)) if media else json.loads(payload),
                self.settings,
                text_ids=np.asarray(json.loads(ids_json), dtype=np.int64),
            )
            if self.threshold is not None:
                part.sample = below_threshold(part.sample, self.threshold)
            parts.append(part)
        out = np.empty(len(parts), dtype=object)
        out[:] = parts
        return {"partial": out}


def below_threshold(sample: Any, threshold: int) -> Any:
    """The candidates of ``sample`` whose priority is at most ``threshold`` (a new object)."""
    from isoscope.engine.extraction import SampleCandidates

    keep = np.flatnonzero(sample.priority <= np.uint64(threshold))
    out = SampleCandidates(sample.limit, sample.num_states, sample.hidden_size, capacity=len(keep))
    out.commit(
        np.zeros(0, dtype=np.int64),
        sample.priority[keep],
        sample.text_id[keep],
        sample.position[keep],
        sample.vectors[:, keep, :],
    )
    return out


def sample_is_complete(partial: Any, threshold: int | None) -> bool:
    """True when cutting candidates at ``threshold`` lost none of the final sample.

    The merged sample is the ``need`` smallest priorities among the kept candidates; if it is
    full and its largest priority is within the cut-off, every dropped token (priority above the
    cut-off) ranks after all of them, so the sample equals the uncut one.
    """
    if threshold is None:
        return True
    need = min(partial.sample.limit, int(partial.stats.count))
    return len(partial.sample) == need and (
        need == 0 or int(partial.sample.priority.max()) <= threshold
    )


def _isoscope_cause(exc: BaseException) -> IsoscopeError | None:
    """The user-facing error a worker raised, unwrapped from Ray's exception wrappers."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, IsoscopeError):
            return e
        stack += [getattr(e, "cause", None), e.__cause__, e.__context__]
    return None


def run_pool(
    ray: Any,
    spec: ModelSpec,
    corpus: Corpus,
    settings: Any,
    options: RayOptions,
    workers: int,
    plan: Plan,
    progress: Progress | None,
    batch_delay_s: float,
) -> Any:
    """The workers' partials of ``plan``, merged in the order they arrive (the merge does not
    depend on it), reporting texts done to ``progress``; a worker's :class:`IsoscopeError`
    comes back as one :class:`RayEngineError` line."""
    ds = work_dataset(ray, corpus, plan)
    remote: dict[str, Any] = {"num_cpus": options.cpus_per_worker}
    if options.gpus_per_worker > 0:
        remote["num_gpus"] = options.gpus_per_worker
    parts = ds.map_batches(
        ExtractWorker,
        batch_size=1,  # one chunk (a run of whole local batches) per call
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=workers),
        fn_constructor_args=(
            spec,
            settings,
            plan.threshold,
            max(1, int(options.cpus_per_worker)),
            batch_delay_s,
        ),
        **remote,
    )
    merged = None
    done = 0
    if progress is not None:
        progress(0, len(corpus))
    try:
        for batch in parts.iter_batches(batch_size=None, batch_format="numpy"):
            for part in batch["partial"]:
                merged = part if merged is None else merged.merge(part)
                done += len(part.text_ids)
                if progress is not None:
                    progress(done, len(corpus))
    except IsoscopeError:
        raise
    except Exception as exc:
        cause = _isoscope_cause(exc)
        if cause is not None:
            raise RayEngineError(f"a Ray worker failed: {cause}") from None
        raise
    if merged is None:
        raise RayEngineError("the Ray workers returned nothing; check the cluster's logs")
    return merged
