"""The one way isoscope attaches forward hooks to a model: :func:`forward_hooks`.

Hooks on a shared, cached model are global state. Attach them only through this context manager,
which registers every hook on entry and removes all of them in ``finally``, so an exception
anywhere inside (tokenization, the forward pass, the caller's own code) leaves no hook behind.
Enter it before anything that can raise. (TransformerLens keeps hooks in a context manager for the
same reason.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch

# (module, args, output), (module, args) with pre=True, or with kwargs as well: 2 to 4 arguments
Hook = Callable[..., Any]


@contextmanager
def forward_hooks(
    hooks: Mapping[torch.nn.Module, Hook | list[Hook]],
    *,
    pre: bool = False,
    with_kwargs: bool = False,
) -> Iterator[None]:
    """Attach ``{module: fn}`` (or ``{module: [fn, ...]}``) forward hooks for the ``with`` body.

    ``fn(module, inputs, output)`` may return a replacement output, as torch allows. With
    ``pre=True`` the hooks are forward *pre*-hooks, ``fn(module, inputs)``. With
    ``with_kwargs=True`` they also get the keyword arguments: ``fn(module, args, kwargs)`` (pre) or
    ``fn(module, args, kwargs, output)``. Every hook is removed on exit, including when registering
    a later one or the body raises.
    """
    handles: list[torch.utils.hooks.RemovableHandle] = []
    try:
        for module, fns in hooks.items():
            for fn in fns if isinstance(fns, list | tuple) else [fns]:
                register = module.register_forward_pre_hook if pre else module.register_forward_hook
                handles.append(register(fn, with_kwargs=True) if with_kwargs else register(fn))
        yield
    finally:
        for handle in handles:
            handle.remove()
