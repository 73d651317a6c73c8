"""The one place that sets the process environment isoscope needs.

The CLI and the Streamlit frame call :func:`use_runtime_environment` before transformers is
imported: quiet tokenizers, kernel caches, and no Hub telemetry. They do not force the Hugging
Face libraries offline: transformers only ever reads local folders (``local_files_only``), and
Hub ids are downloaded on demand by :mod:`isoscope.engine.load.hub` alone, which honours a user's
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
    (the statistics kernel, :class:`isoscope.engine.extraction.kernel.MomentsKernel`; UMAP,
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
