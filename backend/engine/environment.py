"""The one place that sets the process environment isoscope needs.

The CLI and the Streamlit frame call :func:`use_runtime_environment` before transformers is
imported: quiet tokenizers, kernel caches, and no Hub telemetry. They do not force the Hugging
Face libraries offline: transformers only ever reads local folders (``local_files_only``), and
Hub ids are downloaded on demand by :mod:`backend.engine.load.hub` alone, which honours a user's
``HF_HUB_OFFLINE=1`` (cache only). Tests, benchmarks and child processes that only read the
cache use :func:`use_offline_environment` / :func:`offline_env`. Values already set by the user
win (``setdefault``).
"""

from __future__ import annotations

import os
from pathlib import Path

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    # tokenizers' own thread pool fights torch's and warns after a fork
    "TOKENIZERS_PARALLELISM": "false",
}


RUNTIME_ENV = {
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}


def use_runtime_environment() -> None:
    """Set :data:`RUNTIME_ENV` where the user has not, and the kernel caches; downloads stay
    possible (see the module docstring)."""
    for key, value in RUNTIME_ENV.items():
        os.environ.setdefault(key, value)
    use_kernel_caches()


def runtime_env(**extra: str) -> dict[str, str]:
    """A copy of ``os.environ`` with :data:`RUNTIME_ENV` (under the user's values) and ``extra``."""
    return {**RUNTIME_ENV, **os.environ, **extra}


def use_offline_environment() -> None:
    """Set :data:`OFFLINE_ENV` in ``os.environ`` where the user has not set them, and the
    compiled-kernel caches (:func:`use_kernel_caches`)."""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    use_kernel_caches()


def use_kernel_caches() -> None:
    """Keep compiled kernels in the isoscope cache so a second start compiles less: numba's
    (the statistics kernel, :class:`backend.engine.extraction.kernel.MomentsKernel`; UMAP,
    pynndescent) in ``<isoscope cache>/numba``. Must run before numba is imported. A user's
    setting wins."""
    try:
        root = str(default_cache_dir())
    except ImportError:  # no platformdirs and no ISOSCOPE_CACHE_DIR: leave the libraries' defaults
        return
    os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(root, "numba"))


def offline_env(**extra: str) -> dict[str, str]:
    """A copy of ``os.environ`` with :data:`OFFLINE_ENV` and ``extra`` applied, for a child process."""
    return {**os.environ, **OFFLINE_ENV, **extra}


def default_cache_dir() -> Path:
    """isoscope's cache folder: ``$ISOSCOPE_CACHE_DIR``, else the user cache dir (platformdirs)."""
    env = os.environ.get("ISOSCOPE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("isoscope"))


def quiet_libraries() -> None:
    """Silence transformers' progress bars and warnings; isoscope reports its own progress."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except Exception:
        pass


def app_dir() -> Path:
    """The folder holding ``app.py``, ``pages/`` and ``assets/``: the source checkout (also an
    editable install), or ``isoscope_app/`` beside the installed ``backend`` package in a wheel."""
    base = Path(__file__).resolve().parents[2]
    installed = base / "isoscope_app"
    return installed if (installed / "app.py").is_file() else base


def assets_dir() -> Path:
    """The bundled sample corpus, STS pairs and word-sense examples (``assets/``)."""
    return app_dir() / "assets"


MMAP_THRESHOLD_BYTES = 4 << 20  # allocations this large get their own mapping (below)
BIG_WEIGHTS_BYTES = 1 << 30  # models whose weights take this much on the CPU get it
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)
_large_frees_given_back = False


def give_back_large_frees() -> bool:
    """Have glibc serve allocations of :data:`MMAP_THRESHOLD_BYTES` and more from their own
    mappings, which go back to the system when freed (once per process; False without glibc).

    glibc's default threshold rises with every such free, up to 32 MiB; after it, a big model's
    per-layer activations (25-150 MB per tensor for a 1.5B decoder at 32 x 128 tokens) come from
    the heap, which keeps them once freed. A 1.5B Qwen2-shaped decoder's extraction of 64 texts
    peaked 3.0 GB above its loaded weights by default and 2.2 GB with 4 MiB (9,132 vs 8,297 MiB;
    one batch's hidden states are 805 MB), and a plain forward of one batch kept 2.1 GB after it
    was freed against none; the extraction took 9% longer (72.0 vs 78.6 s, one run each). So
    :func:`backend.engine.load.models.load_model` sets it for models of :data:`BIG_WEIGHTS_BYTES` and
    more on the CPU only, where the memory is what limits."""
    global _large_frees_given_back
    if _large_frees_given_back:
        return True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        done = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError):
        return False
    _large_frees_given_back = done
    return done
