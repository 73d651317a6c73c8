"""A checkpoint trajectory: how the geometry of one model changes over training steps.

Input: a folder of checkpoints as the Hugging Face Trainer writes them (``checkpoint-500/``) or
named ``step1000/`` (``step-1000``, ``step_1000``), sorted by step; or an explicit list of
checkpoint folders. Per checkpoint and hidden state: the largest |mean| and its dim, the outlier
dims (:func:`isoscope.analysis.outliers.outlier_dims_by_state`), anisotropy and IsoScore
(:func:`isoscope.analysis.anisotropy.by_state`); per LayerNorm, the dims whose gamma is flagged (BERT
Busters' |gamma - mean| > k std, :func:`isoscope.analysis.layernorm.params.flag_params`) and the LN outlier dims
(:func:`isoscope.analysis.layernorm.params.detect_outliers`).

Sources: Kovaleva et al. 2021 (arXiv 2105.06990) trace LayerNorm outliers through pre-training;
Puccetti et al. 2022 (arXiv 2205.11380) tie them to token frequency; Pythia (Biderman et al.
2023) publishes 154 checkpoints per model for exactly this kind of study.

Each checkpoint's extraction goes through :func:`isoscope.engine.store.cached_extract.cached_extract`, keyed by the
checkpoint's fingerprint (config + weight files), so adding a checkpoint computes only that one.
Bad input never loses finished work: a checkpoint that fails to load, or whose architecture differs
from the first one, is skipped with a message in :attr:`Trajectory.errors`, and the others are kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from isoscope.analysis.anisotropy import N_PAIRS, PAIR_SEED
from isoscope.analysis.layernorm.thresholds import LN_THRESHOLDS
from isoscope.engine.budget.progress import Progress, report
from isoscope.engine.errors import InputError, IsoscopeError

if TYPE_CHECKING:  # type hints only: importing them would pull in torch
    from isoscope.engine.extraction import ExtractionResult, ExtractionSettings
    from isoscope.engine.inputs.corpus import Corpus
    from isoscope.engine.load.models import LoadedModel
    from isoscope.engine.store.cache import ResultCache

STEP_NAME = re.compile(r"^(?:checkpoint|step)[-_]?(\d+)$", re.IGNORECASE)


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path

    @property
    def name(self) -> str:
        return self.path.name


def _step_of(path: Path) -> int | None:
    match = STEP_NAME.match(path.name)
    if match:
        return int(match.group(1))
    state = path / "trainer_state.json"
    if state.is_file():
        try:
            return int(json.loads(state.read_text())["global_step"])
        except (ValueError, KeyError, TypeError, OSError):
            return None
    return None


def find_checkpoints(folder: str | Path) -> list[Checkpoint]:
    """The ``checkpoint-*/`` or ``step*/`` folders directly inside ``folder``, sorted by step.

    Raises :class:`InputError` when ``folder`` is missing or holds none.
    """
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise InputError(f"checkpoint folder {str(folder)!r} does not exist; give a folder path")
    found = [
        Checkpoint(int(m.group(1)), p)
        for p in root.iterdir()
        if p.is_dir() and (m := STEP_NAME.match(p.name))
    ]
    if not found:
        raise InputError(
            f"{str(folder)!r} holds no checkpoint folders; expected subfolders named checkpoint-STEP "
            "(as the Hugging Face Trainer writes them) or stepSTEP, or pass a list of checkpoint folders"
        )
    return sorted(found, key=lambda c: (c.step, c.name))


def resolve_checkpoints(paths: str | Path | Sequence[str | Path]) -> list[Checkpoint]:
    """A folder of checkpoints (see :func:`find_checkpoints`) or a list of checkpoint folders.

    A list is sorted by step when every folder's step is known (from its name, or the Trainer's
    ``trainer_state.json``); otherwise it keeps the given order and the steps are 0, 1, 2, ...
    """
    given = [paths] if isinstance(paths, str | Path) else list(paths)
    items = [Path(str(p).strip()).expanduser() for p in given if str(p).strip()]
    if not items:
        raise InputError(
            "no checkpoints given; pass a folder of checkpoint-*/ or a list of folders"
        )
    if len(items) == 1 and not (items[0] / "config.json").exists():
        return find_checkpoints(items[0])
    for p in items:
        if not p.is_dir():
            raise InputError(f"checkpoint {str(p)!r} is not a folder; give checkpoint folders")
    steps = [_step_of(p) for p in items]
    known = [s for s in steps if s is not None]
    if len(known) == len(steps):  # every step known
        return sorted(
            (Checkpoint(s, p) for s, p in zip(known, items, strict=True)), key=lambda c: c.step
        )
    return [Checkpoint(i, p) for i, p in enumerate(items)]


# ----------------------------------------------------------------------------- per-checkpoint figures


@dataclass(frozen=True)
class CheckpointPoint:
    """Figures of one checkpoint. ``states``: one dict per hidden state (index, name,
    max_abs_mean, max_abs_mean_dim, outlier_dims, anisotropy, isoscore); ``ln_gamma_flags``:
    {norm name: dims whose gamma is flagged}; ``ln_outlier_dims``: BERT Busters' outlier dims
    over the default norms."""

    step: int
    path: str
    fingerprint: str
    model: dict
    states: list[dict]
    ln_gamma_flags: dict[str, list[int]]
    ln_outlier_dims: list[int]
    cached: bool = False


def _architecture(info: dict) -> tuple:
    return (info.get("model_type"), info.get("num_layers"), info.get("hidden_size"))


def state_figures(
    result: ExtractionResult, *, n_pairs: int = N_PAIRS, seed: int = PAIR_SEED
) -> list[dict]:
    """Per hidden state of an ExtractionResult: largest |mean| (and its dim), outlier dims,
    anisotropy and IsoScore."""
    from isoscope.analysis.anisotropy import by_state
    from isoscope.analysis.outliers import outlier_dims_by_state

    iso = by_state(result, n_pairs=n_pairs, seed=seed, top_k=0, similarity=False)
    rows = []
    dims_by_state = outlier_dims_by_state(result)
    for s, name in enumerate(result.state_names):
        abs_mean = np.abs(result.mean[s])
        j = int(np.argmax(abs_mean))
        rows.append(
            {
                "index": s,
                "name": name,
                "max_abs_mean": float(abs_mean[j]),
                "max_abs_mean_dim": j,
                "outlier_dims": dims_by_state[s],
                "anisotropy": float(iso.anisotropy[s]),
                "isoscore": float(iso.isoscore[s]),
            }
        )
    return rows


def layernorm_figures(
    loaded: LoadedModel, k: float = LN_THRESHOLDS.k, share: float = LN_THRESHOLDS.share
) -> tuple[dict, list[int]]:
    """(per-norm gamma-flagged dims, LN outlier dims) of a loaded model; ({}, []) without norms."""
    from isoscope.analysis.layernorm.params import (
        detect_outliers,
        flag_params,
        ln_params,
        norms_of,
        select_norms,
    )

    try:
        sites = [s for s in norms_of(loaded) if s.role != "head"]
    except IsoscopeError:
        return {}, []
    params = ln_params(sites)
    flags = flag_params(params.gamma, k)
    per_norm = {
        name: [int(j) for j in np.flatnonzero(flags[i])] for i, name in enumerate(params.names)
    }
    found = detect_outliers(ln_params(select_norms(sites)), k, share)
    return per_norm, list(found.dims)


# ----------------------------------------------------------------------------- the trajectory


@dataclass
class Trajectory:
    """Figures per checkpoint (in step order), plus the messages of checkpoints that were skipped."""

    points: list[CheckpointPoint] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def steps(self) -> list[int]:
        return [p.step for p in self.points]

    @property
    def checkpoints(self) -> list[str]:
        return [p.path for p in self.points]

    @property
    def complete(self) -> bool:
        return not self.errors

    def series(self, key: str) -> np.ndarray:
        """A per-state figure over checkpoints: float64 (n_checkpoints, S)."""
        return np.array([[row[key] for row in p.states] for p in self.points], dtype=np.float64)

    def state_names(self) -> list[str]:
        return [row["name"] for row in self.points[0].states] if self.points else []

    def skip(self, ckpt: Checkpoint, why: str) -> None:
        """Leave ``ckpt`` out, with the message saying ``why``."""
        self.errors.append(f"{ckpt.name} (step {ckpt.step}) {why}")
        self.skipped.append(str(ckpt.path))

    def emergence(self) -> list[dict]:
        """Every (hidden state, dim) that is an outlier at some checkpoint: the first and last step
        it is one, and at how many checkpoints (which dims become outliers, and when)."""
        seen: dict[tuple[int, int], list[int]] = {}
        for p in self.points:
            for row in p.states:
                for d in row["outlier_dims"]:
                    seen.setdefault((row["index"], d), []).append(p.step)
        names = self.state_names()
        return [
            {
                "state": names[s],
                "index": s,
                "dim": d,
                "first_step": steps[0],
                "last_step": steps[-1],
                "checkpoints": len(steps),
            }
            for (s, d), steps in sorted(seen.items(), key=lambda kv: (kv[1][0], kv[0]))
        ]

    def to_json(self) -> dict:
        """``{"steps", "checkpoints", "states": [[per-state figures] per checkpoint]}`` plus the
        LayerNorm figures, the outlier emergence table and the errors of skipped checkpoints."""
        return {
            "steps": self.steps,
            "checkpoints": self.checkpoints,
            "states": [p.states for p in self.points],
            "layernorm": [
                {"gamma_flagged": p.ln_gamma_flags, "outlier_dims": p.ln_outlier_dims}
                for p in self.points
            ],
            "models": [p.model for p in self.points],
            "emergence": self.emergence(),
            "complete": self.complete,
            "errors": list(self.errors),
        }


def run_trajectory(
    checkpoints: Sequence[Checkpoint],
    corpus: Corpus,
    settings: ExtractionSettings | None = None,
    *,
    device: str = "auto",
    dtype: str = "float32",
    allow_pickle: bool = False,
    device_map: str | None = None,
    cache: ResultCache | None = None,
    use_cache: bool = True,
    n_pairs: int = N_PAIRS,
    seed: int = PAIR_SEED,
    progress: Progress | None = None,
    extract_progress: Progress | None = None,
    on_checkpoint: Callable[[str], None] | None = None,
) -> Trajectory:
    """Load, extract (through the disk cache) and summarise each checkpoint in order, one model in
    memory at a time. A checkpoint that fails to load or to run, or whose architecture (model type,
    layers, width) differs from the first good one, is skipped with a message; the rest are kept.

    ``progress(done, total)``: checkpoints finished (kept or skipped) of all, before each one and
    once at the end; ``extract_progress(done, total)``: texts of the current extraction;
    ``on_checkpoint(label)``: "[i/n] name (step s)" as each checkpoint starts."""
    import gc

    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.load.models import load_model
    from isoscope.engine.store.cache import ResultCache
    from isoscope.engine.store.cached_extract import cached_extract
    from isoscope.engine.store.entries import cache_key

    settings = settings or ExtractionSettings()
    store = cache if cache is not None else ResultCache()
    out = Trajectory()
    reference: tuple | None = None
    for i, ckpt in enumerate(checkpoints):
        report(progress, i, len(checkpoints))
        if on_checkpoint is not None:
            on_checkpoint(f"[{i + 1}/{len(checkpoints)}] {ckpt.name} (step {ckpt.step})")
        try:
            loaded = load_model(
                str(ckpt.path),
                device=device,
                dtype=dtype,
                allow_pickle=allow_pickle,
                device_map=device_map,
            )
        except Exception as exc:  # ModelLoadError, or anything a damaged file raises
            out.skip(ckpt, f"failed to load: {_describe_error(exc)}")
            continue
        arch = _architecture(loaded.info.to_dict())
        if reference is None:
            reference = arch
        elif arch != reference:
            out.skip(
                ckpt,
                f"has another architecture ({arch[0]}, {arch[1]} layers, width {arch[2]}) than the "
                f"first checkpoint ({reference[0]}, {reference[1]} layers, width {reference[2]}); a "
                "trajectory needs one architecture, so it was skipped",
            )
            del loaded
            continue
        try:
            if use_cache:
                hit = store.path(cache_key(loaded.fingerprint, corpus.sha, settings)).exists()
                result = cached_extract(loaded, corpus, settings, extract_progress, store)
            else:
                hit = False
                result = extract(loaded, corpus, settings, extract_progress)
            out.points.append(_point(ckpt, loaded, result, hit, n_pairs, seed))
        except Exception as exc:  # a broken checkpoint must not lose the others
            out.skip(ckpt, f"could not be analysed: {_describe_error(exc)}")
            continue
        del loaded, result
        gc.collect()
    report(progress, len(checkpoints), len(checkpoints))
    return out


def _point(
    ckpt: Checkpoint,
    loaded: LoadedModel,
    result: ExtractionResult,
    cached: bool,
    n_pairs: int,
    seed: int,
) -> CheckpointPoint:
    """One checkpoint's summary: the per-state curves and the LayerNorm gamma flags and dims."""
    states = state_figures(result, n_pairs=n_pairs, seed=seed)
    gamma_flags, ln_dims = layernorm_figures(loaded)
    return CheckpointPoint(
        step=ckpt.step,
        path=str(ckpt.path),
        fingerprint=loaded.fingerprint,
        model=loaded.info.to_dict(),
        states=states,
        ln_gamma_flags=gamma_flags,
        ln_outlier_dims=ln_dims,
        cached=cached,
    )


def _describe_error(exc: BaseException) -> str:
    if isinstance(exc, IsoscopeError):
        return str(exc)
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"
