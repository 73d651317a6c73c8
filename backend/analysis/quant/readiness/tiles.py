"""One site's |x| for every token x every channel, max-pooled into tiles (the token x channel
view of the quantization page)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from isoscope.analysis.quant.params import QUANT_BATCH_SIZE, QUANT_MAX_LENGTH
from isoscope.analysis.quant.readiness.evaluation import run_model
from isoscope.analysis.quant.readiness.scan import padded, select_rows
from isoscope.analysis.quant.sites import Site
from isoscope.engine.arch.hooks import forward_hooks
from isoscope.engine.budget.progress import Progress, report
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import UnsupportedModelError
from isoscope.engine.extraction import pad_token_id, tokenize


@dataclass(frozen=True)
class MagnitudeTiles:
    """|x| of one site for every non-padding token (corpus order) x every input channel,
    max-pooled into tiles so thousands of tokens fit a figure: ``tiles`` float32 (rows, cols),
    each tile the max |x| over ``tokens_per_row`` consecutive tokens and ``channels_per_col``
    consecutive channels (the issue SmoothQuant users hit: a full matrix runs plotting libraries
    out of memory; max pooling keeps every spike visible)."""

    site: str
    tiles: np.ndarray
    tokens_per_row: int
    channels_per_col: int
    n_tokens: int
    width: int


class _Stop(Exception):
    """Raised inside the hook once the site's input is recorded: the rest of the pass is skipped."""


def site_magnitudes(
    loaded,
    texts: list[str] | tuple[str, ...],
    site: Site,
    *,
    max_length: int = QUANT_MAX_LENGTH.default,
    batch_size: int = QUANT_BATCH_SIZE.default,
    max_rows: int = 400,
    max_cols: int = 600,
    progress: Progress | None = None,
) -> MagnitudeTiles:
    """Stream one site's |x| over the corpus into max-pooled tiles (see :class:`MagnitudeTiles`);
    each batch's forward pass stops at the site (blocks after it never run)."""
    tokenized = tokenize(loaded, tuple(texts), max_length)
    lengths = tokenized.lengths
    n_tokens = int(lengths.sum())
    tpr = max(1, math.ceil(n_tokens / max_rows))
    cpc = max(1, math.ceil(site.width / max_cols))
    n_rows, n_cols = math.ceil(n_tokens / tpr), math.ceil(site.width / cpc)
    tiles = torch.zeros(n_rows, n_cols, dtype=torch.float32)
    module = dict(loaded.encoder.named_modules())[site.paths[0]]
    rows_all = np.flatnonzero(lengths > 0)
    batches = [rows_all[i : i + batch_size] for i in range(0, len(rows_all), batch_size)]
    state: dict = {"mask": None, "offset": 0}

    def hook(mod, inputs):
        rows = select_rows(inputs[0], state["mask"])
        if rows is None:
            raise UnsupportedModelError(f"the input of {site.name} is not one row per token")
        a = rows.abs().float().cpu()  # (n, width), texts in corpus order
        pad = n_cols * cpc - site.width
        if pad:
            a = F.pad(a, (0, pad))
        a = a.reshape(a.shape[0], n_cols, cpc).amax(-1)  # (n, cols)
        index = (torch.arange(a.shape[0]) + state["offset"]) // tpr
        tiles.scatter_reduce_(0, index[:, None].expand_as(a), a, "amax")
        state["offset"] += a.shape[0]
        raise _Stop

    pad_id = pad_token_id(loaded)
    with forward_hooks({module: hook}, pre=True), torch.inference_mode():
        for b, rows in enumerate(batches):
            ids, mask = padded(tokenized, rows, pad_id)
            state["mask"] = mask.to(loaded.device)
            try:
                run_model(loaded, ids, mask)
            except _Stop:
                pass
            if not report(progress, b + 1, len(batches)):
                break
    return MagnitudeTiles(site.name, to_numpy(tiles), tpr, cpc, n_tokens, site.width)
