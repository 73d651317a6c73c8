"""Where and how wide the Ray engine runs: its options (:class:`RayOptions`, :class:`ModelSpec`),
the connection to a cluster (:func:`ray_session`: an unreachable address fails in seconds with one
:class:`RayEngineError` line, because ``ray.init`` itself would retry for minutes; a local
instance started here is shut down in ``finally``, a cluster we only connected to is left
running) and the number of workers it has room for (:func:`pool_size`)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from isoscope.engine.errors import InputError, IsoscopeError

CONNECT_TIMEOUT_S = 5.0


class RayEngineError(IsoscopeError):
    """The Ray cluster cannot be used as asked (unreachable, too small, a worker-side failure)."""


@dataclass(frozen=True)
class RayOptions:
    """Where and how wide to run: ``address`` is ``local`` (a private instance, shut down after),
    ``auto`` (the cluster ``ray start --head`` started on this machine) or ``HOST:PORT`` /
    ``ray://HOST:PORT``; ``None`` uses the instance this process is already connected to."""

    address: str | None = "local"
    workers: int | None = None  # None: every CPU (or every GPU // gpus_per_worker) of the cluster
    gpus_per_worker: float = 0.0
    cpus_per_worker: float = 1.0
    num_cpus: int | None = None  # only for address="local": CPUs of the private instance

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise InputError(f"--workers must be 1 or more, got {self.workers}")
        if self.gpus_per_worker < 0:
            raise InputError(f"--gpus-per-worker must be 0 or more, got {self.gpus_per_worker}")
        if self.cpus_per_worker <= 0:
            raise InputError(f"CPUs per worker must be positive, got {self.cpus_per_worker}")


@dataclass(frozen=True)
class ModelSpec:
    """How every worker loads the model (the same source must be readable on every node)."""

    source: str
    device: str = "cpu"
    dtype: str = "float32"
    allow_pickle: bool = False
    quota_bytes: int | None = None  # a shared server's cap on the Hugging Face cache


def _quiet_ray() -> None:
    for name in ("ray", "ray.data", "ray._private", "ray.util"):
        logging.getLogger(name).setLevel(logging.ERROR)


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Fail fast when nothing listens at ``address`` (``ray.init`` would retry for minutes)."""
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RayEngineError(
            f"--ray-address {address!r} is not local, auto, HOST:PORT or ray://HOST:PORT; "
            "give the address `ray start --head` printed (e.g. 10.0.0.5:6379)"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise RayEngineError(
            f"cannot reach a Ray cluster at {address} ({exc.strerror or exc}); start one with "
            "`ray start --head` on that machine, check the host and port, or use --ray-address local"
        ) from None


@contextlib.contextmanager
def ray_session(options: RayOptions) -> Iterator[Any]:
    """Connect to (or start) Ray for the duration of the block; yields the ``ray`` module.

    A connection made here is closed in ``finally`` (Ctrl-C included): for ``local`` that stops
    every Ray process this call started; a remote cluster keeps running.
    """
    # Ray's C++ core logs to stderr (e.g. a warning on every actor pool); the CLI keeps stderr for
    # its own progress. Errors still reach the driver as exceptions.
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")
    import ray

    _quiet_ray()
    if options.address is None and ray.is_initialized():
        yield ray
        return
    if ray.is_initialized():
        raise RayEngineError(
            "this process is already connected to Ray; use that connection (address None)"
        )
    address = options.address or "local"
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.ERROR,
        "configure_logging": True,
    }
    if address == "local":
        kwargs["num_cpus"] = options.num_cpus
    elif address != "auto":
        check_reachable(address)
    try:
        try:
            # Ray's core writes to fd 2 while connecting (a line per retry when a port answers
            # but is no Ray head); Ray's own processes log to its session folder anyway
            with _stderr_silenced():
                ray.init(address=address, **kwargs)
        except ConnectionError as exc:
            if address == "auto":
                raise RayEngineError(
                    "no Ray cluster runs on this machine (--ray-address auto); start one with "
                    "`ray start --head`, give its address, or use --ray-address local"
                ) from None
            raise RayEngineError(
                f"cannot connect to a Ray cluster at {address} ({str(exc).splitlines()[0][:120]}); "
                "start one with `ray start --head` there, or use --ray-address local"
            ) from None
        _configure_data_context()
        yield ray
    finally:
        ray.shutdown()  # also after an interrupted ray.init: stops whatever it had started


@contextlib.contextmanager
def _stderr_silenced() -> Iterator[None]:
    """Send file descriptor 2 (where Ray's C++ core logs) to /dev/null for the block."""
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _configure_data_context() -> None:
    import ray.data

    for handler in logging.getLogger("ray.data").handlers:  # its console handler logs INFO
        if not isinstance(handler, logging.FileHandler) and "File" not in type(handler).__name__:
            handler.setLevel(logging.ERROR)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    ctx.log_internal_stack_trace = False
    ctx.execution_options.preserve_order = False  # the merge does not depend on order


def pool_size(ray_module: Any, options: RayOptions) -> int:
    """Workers to start: ``options.workers``, checked against the cluster's CPUs and GPUs."""
    resources = ray_module.cluster_resources()
    cpus = float(resources.get("CPU", 0))
    gpus = float(resources.get("GPU", 0))
    if options.gpus_per_worker > 0:
        fit = int(gpus // options.gpus_per_worker)
        if fit < 1:
            raise RayEngineError(
                f"the cluster has {gpus:g} GPU(s), fewer than --gpus-per-worker "
                f"{options.gpus_per_worker:g}; add GPU nodes or lower --gpus-per-worker"
            )
    else:
        fit = int(cpus // options.cpus_per_worker)
    fit = min(fit, int(cpus // options.cpus_per_worker)) if cpus else fit
    if fit < 1:
        raise RayEngineError("the Ray cluster has no free CPU for a worker; add nodes")
    if options.workers is None:
        return fit
    if options.workers > fit:
        what = "GPUs" if options.gpus_per_worker > 0 else "CPUs"
        raise RayEngineError(
            f"--workers {options.workers} needs more {what} than the cluster has "
            f"({cpus:g} CPUs, {gpus:g} GPUs: room for {fit}); lower --workers or add nodes"
        )
    return options.workers
