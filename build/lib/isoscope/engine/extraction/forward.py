"""Forward passes of an extraction: padded batches under ``torch.inference_mode()``, reduced on
the model's device into streaming statistics and the planned token sample; out-of-memory batches
are halved and retried (:func:`extract_partial`, :func:`extract`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from isoscope.engine.allocator import for_extraction, release_freed_memory
from isoscope.engine.arch.probe import no_cache
from isoscope.engine.budget.batching import batch_count, equal_run, length_order
from isoscope.engine.budget.progress import Progress
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError, IsoscopeError, UnsupportedModelError
from isoscope.engine.extraction.kernel import MOMENTS
from isoscope.engine.extraction.media import MediaTokens, media_forward
from isoscope.engine.extraction.partial import PartialExtraction, finish, token_table, tokenize_part
from isoscope.engine.extraction.sample import SampleCandidates, sample_limit, token_priority
from isoscope.engine.extraction.stats import EagerStates, RunningStats, WorkBuffers
from isoscope.engine.extraction.tokenization import TokenizedCorpus
from isoscope.engine.extraction.types import ExtractionResult, ExtractionSettings, TokenTable
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import LoadedModel, weight_bytes

if TYPE_CHECKING:
    from isoscope.engine.inputs.media import MediaCorpus


Notice = Callable[[str], None]


@dataclass(frozen=True)
class BatchStates:
    """What an observer of an extraction (:func:`extract_partial`'s ``observe``) sees of one
    batch, once its statistics are reduced: the S hidden states of the padded batch as the
    forward pass left them (each (B, T, d), on the model's device, in its dtype), ``flat`` the
    analysed tokens' rows in the flattened (B * T) batch, ``rows`` the same tokens' rows in the
    part's token table (text order, then position), and ``tokens`` their :class:`TokenTable`
    rows. An observer reads the states and keeps reductions; an out-of-memory error it raises
    makes the extraction halve the batch and run it again, so it must keep nothing of a batch
    until its own work on it is done."""

    hidden_states: tuple[torch.Tensor, ...]
    flat: np.ndarray
    rows: np.ndarray
    tokens: TokenTable

    def state(self, index: int) -> torch.Tensor:
        """(n, d): hidden state ``index`` at the analysed tokens, on its device and dtype."""
        h = self.hidden_states[index]
        flat = torch.from_numpy(self.flat).to(h.device)
        return h.reshape(-1, h.shape[-1]).index_select(0, flat)


Observer = Callable[[BatchStates], None]


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA/MPS/CPU out-of-memory errors, whatever class the backend raises."""
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    if isinstance(exc, RuntimeError):
        msg = str(exc).lower()
        return "out of memory" in msg or "can't allocate memory" in msg
    return False


def free_device_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps" and hasattr(torch, "mps"):
        torch.mps.empty_cache()


def pad_token_id(loaded: LoadedModel) -> int:
    """The id padded positions get (0 when the tokenizer has none: the attention mask hides them)."""
    if loaded.tokenizer is None:  # images and audio: the batch plan's index rows only
        return 0
    pad = loaded.tokenizer.pad_token_id
    return 0 if pad is None else int(pad)


def pad_rows(rows: Sequence[np.ndarray], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded ``(input_ids, attention_mask)`` int64 (B, T) arrays of token-id sequences
    (T = the longest; padded positions hold ``pad_id`` and mask 0). The one padding rule of every
    forward pass over token ids: extraction, ablation, the massive-activation scans.

    Right, never left: the pads come after every real token. Attention hides them through the
    mask; a mixer that reads no mask (RWKV's time mixing, RecurrentGemma's RG-LRU in part) or one
    that does (Mamba, Mamba-2, Gated DeltaNet, short convolutions) is causal, so a pad only ever
    reaches positions after it, which are pads too: every real position equals the text run
    alone. Left padding would run the recurrence through the pads first (RWKV: off by ~3.7 on a
    tiny random model; RecurrentGemma: ~0.04)."""
    width = max((len(r) for r in rows), default=0)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for r, seq in enumerate(rows):
        ids[r, : len(seq)] = seq
        mask[r, : len(seq)] = 1
    return ids, mask


def pad_batch(
    tokenized: TokenizedCorpus, rows: np.ndarray, pad_id: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pad_rows` of the texts ``rows`` of ``tokenized``."""
    return pad_rows([tokenized.input_ids[t] for t in rows], pad_id)


def forward_hidden_states(
    loaded: LoadedModel, ids: np.ndarray, mask: np.ndarray
) -> tuple[torch.Tensor, ...]:
    """One forward pass; the tuple of S (B, T, d) hidden states, on the model's device(s).

    State L is the model's ``last_hidden_state`` (the output every user of the model reads), as
    for images and audio. A model that keeps several copies of the residual stream (Gemma 3n's
    AltUp: each state is (streams, B, T, d)) is read at the stream its layers compute on, the
    config's ``altup_active_idx``; its ``last_hidden_state`` merges the streams and is state L.
    """
    out = run_encoder(loaded, ids, mask, output_hidden_states=True)
    hidden_states = getattr(out, "hidden_states", None)
    if not hidden_states:
        raise UnsupportedModelError(
            f"{loaded.info.source!r} ({loaded.info.architecture}) returns no hidden states; "
            "isoscope needs a model that supports output_hidden_states"
        )
    return residual_states(out, loaded.encoder, ids.shape[1])


def run_encoder(
    loaded: LoadedModel, ids: np.ndarray | torch.Tensor, mask: np.ndarray | torch.Tensor, **extra
) -> Any:
    """The base model on one batch of token ids (B, T) and their mask, with no cache built. An
    error the model's own forward raises on these inputs (a length it cannot run, a shape its
    code does not handle) becomes one :class:`UnsupportedModelError` naming the batch; running
    out of memory stays what it is (the caller halves the batch)."""
    ids = torch.as_tensor(ids).to(loaded.device)
    mask = torch.as_tensor(mask).to(loaded.device)
    extra = no_cache(loaded.encoder) | extra
    try:
        return loaded.encoder(input_ids=ids, attention_mask=mask, **extra)
    except IsoscopeError:
        raise
    except Exception as exc:
        if is_out_of_memory(exc) or _raised_by_isoscope(exc):
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:160]
        raise UnsupportedModelError(
            f"{loaded.info.display_name} ({loaded.info.architecture}): its own forward pass fails "
            f"on {ids.shape[0]} text(s) of {ids.shape[1]} tokens ({type(exc).__name__}: {first}); "
            "isoscope reads models that run on texts of any length"
        ) from exc


_PACKAGE_DIR = str(Path(__file__).resolve().parents[2])


def _raised_by_isoscope(exc: BaseException) -> bool:
    """Whether an error came from isoscope's own code inside the forward pass (a hook), which is
    a bug to report, not the model's failure: the frame that raised it lies in this package.
    A ``__torch_function__`` of this package (a mode that watches the pass, as the attention
    scores' reading does) only hands the model's call on to torch: an error raised there is the
    torch function's, on the model's inputs, so the frame before it decides."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code)
        tb = tb.tb_next
    while len(frames) > 1 and _passes_on(frames[-1]):
        frames.pop()
    return bool(frames) and frames[-1].co_filename.startswith(_PACKAGE_DIR)


def _passes_on(code) -> bool:
    return code.co_name == "__torch_function__" and code.co_filename.startswith(_PACKAGE_DIR)


def residual_states(
    out: Any, model: torch.nn.Module, width: int | None = None
) -> tuple[torch.Tensor, ...]:
    """The S (B, T, d) states of a forward pass's output, as isoscope numbers them: its
    ``hidden_states`` at the active AltUp stream (:func:`active_streams`), state L replaced by its
    ``last_hidden_state`` where the shapes agree. The one reading of a text model's output, for
    the extraction and every scan that runs its own forward pass.

    ``width``: the batch's padded length T. A state longer than that comes from a model that pads
    the sequence itself, after the last token, to a multiple of its attention block (LED,
    BigBird's block-sparse attention): its first T positions are the inputs'. A shorter one is
    downsampled (CANINE's molecules): :func:`to_characters`."""
    states = list(active_streams(out.hidden_states, model))
    last = getattr(out, "last_hidden_state", None)
    if states and isinstance(last, torch.Tensor) and last.shape == states[-1].shape:
        states[-1] = last
    if width is not None:
        states = [h[:, :width] if h.shape[1] > width else to_characters(h, width) for h in states]
    return tuple(states)


def active_streams(hidden_states, model: torch.nn.Module) -> tuple[torch.Tensor, ...]:
    """Each (streams, B, T, d) state at the stream the layers compute on (the config's
    ``altup_active_idx``, Gemma 3n); (B, T, d) states as they are."""
    config = getattr(model, "config", None)
    config = getattr(config, "text_config", None) or config
    active = int(getattr(config, "altup_active_idx", 0) or 0)
    return tuple(h[active] if h.ndim == 4 else h for h in hidden_states)


def to_characters(hidden: torch.Tensor, width: int) -> torch.Tensor:
    """A downsampled (B, T / r, d) state back at the (B, T, d) input positions: each molecule's
    vector repeated for the ``r`` characters it covers (CANINE, Clark et al. 2022)."""
    if hidden.shape[1] == width:
        return hidden
    rate = -(-width // max(1, hidden.shape[1]))
    return hidden.repeat_interleave(rate, dim=1)[:, :width]


def extract_partial(
    loaded: LoadedModel,
    items: tuple | list,
    settings: ExtractionSettings | None = None,
    *,
    text_ids: np.ndarray | list[int] | None = None,
    progress: Progress | None = None,
    on_notice: Notice | None = None,
    observe: Observer | None = None,
) -> PartialExtraction:
    """Statistics, sample candidates and token rows of ``items`` (package doc: Partial API):
    texts, or images or clips (:class:`isoscope.engine.inputs.media.MediaItem`). ``observe``
    is called with each batch's :class:`BatchStates` after its reduction: an analysis that
    needs every token's vector at some state (a sparse autoencoder's encoder) reads them
    there, in the same forward pass."""
    settings = settings or ExtractionSettings()
    started = time.perf_counter()
    items = list(items)
    text_ids = _global_ids(text_ids, len(items))
    num_states = loaded.info.num_layers + 1
    d = loaded.info.hidden_size
    limit = sample_limit(settings, num_states, d)
    tokenized = tokenize_part(loaded, items, settings.max_length)
    include = tokenized.analysed(settings.exclude_special, settings.exclude_first)
    tokens = token_table(loaded, tokenized, include, text_ids)
    # Analysed tokens in text order, then position: text t owns rows offset[t]:offset[t + 1].
    counts = np.array([int(m.sum()) for m in include], dtype=np.int64)
    offset = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    tok_text = np.repeat(text_ids, counts)
    tok_pos = tokens.position.astype(np.int64)
    sample, slot = SampleCandidates.planned(
        limit, num_states, d, token_priority(settings.seed, tok_text, tok_pos), tok_text, tok_pos
    )
    plan = _BatchPlan(tokenized, offset, tok_pos, slot, WorkBuffers(), tokens)
    stats = RunningStats(num_states, d, loaded.device)
    if loaded.device.type == "cpu":
        for_extraction(weight_bytes(loaded.model))  # reuse freed memory, or give it back
        if int(offset[-1]) * num_states * d >= COMPILE_MIN_ELEMENTS:
            MOMENTS.compile(loaded.dtype)  # repaid by this corpus; a no-op once warm
    notices: list[str] = list(tokenized.notes) if isinstance(tokenized, MediaTokens) else []

    lengths = tokenized.lengths
    group = tokenized.group  # a model that must not be padded: one length per batch
    order = length_order(lengths, group)
    pad_id = pad_token_id(loaded)
    budget, cap = settings.token_budget, settings.batch_size
    start, done, retry = 0, len(items) - len(order), False
    try:
        with torch.inference_mode():
            while start < len(order):
                width = int(lengths[order[start]])
                count = batch_count(width, len(order) - start, cap, budget)
                if group is not None:  # texts or clips that must not be padded
                    count = equal_run(group, order, start, count)
                rows = order[start : start + count]
                try:
                    # No reference to the batch's hidden states outlives this line: after an
                    # out-of-memory error the retry starts with them released.
                    b_stats = _reduce_batch(
                        plan, _forward_batch(loaded, plan, rows, pad_id, sample), sample, observe
                    )
                except Exception as exc:
                    cap, budget = _halved_after(exc, loaded, count, width, notices, on_notice)
                    retry = True
                    continue
                if retry:  # the failed batch's tensors are released by now
                    free_device_memory(loaded.device)
                    retry = False
                stats.merge(b_stats)
                start += count
                done += count
                if progress is not None:
                    progress(done, len(items))
        if progress is not None and not len(order):
            progress(len(items), len(items))
    finally:  # a failed extraction hands freed memory back too
        plan.buffers.clear()
        if loaded.device.type == "cpu":
            release_freed_memory()  # an idle process does not keep the batches' peak
    return PartialExtraction(
        settings=settings,
        model=loaded.info.to_dict(),
        model_fingerprint=loaded.fingerprint,
        text_ids=text_ids,
        stats=stats.to("cpu"),
        sample=sample,
        tokens=[tokens],
        truncated=tokenized.truncated,
        max_length=tokenized.max_length,
        notices=notices,
        seconds=time.perf_counter() - started,
    )


def _global_ids(text_ids: np.ndarray | list[int] | None, n: int) -> np.ndarray:
    """The (n,) int64 global indices of a part's texts (0..n-1 by default): distinct and in
    [0, 2**47), which the sample's token keys need."""
    ids = (np.arange(n) if text_ids is None else np.asarray(text_ids)).astype(np.int64)
    if ids.shape != (n,) or len(np.unique(ids)) != n:
        raise ValueError("text_ids must give one distinct global index per text")
    if n and (ids.min() < 0 or ids.max() >= 1 << 47):
        raise ValueError("text_ids must lie in [0, 2**47)")
    return ids


def _halved_after(
    exc: Exception,
    loaded: LoadedModel,
    count: int,
    width: int,
    notices: list[str],
    on_notice: Notice | None,
) -> tuple[int, int]:
    """``(texts per batch, token budget)`` halved after a batch of ``count`` texts x ``width``
    tokens ran out of memory, with one notice (updated, not repeated, while batches keep
    shrinking). Anything but an out-of-memory error is raised again; a single text that does not
    fit is an :class:`InputError`."""
    if not is_out_of_memory(exc):
        raise exc
    if count == 1:
        raise InputError(
            f"out of memory on {loaded.info.device} with a single text of {width} "
            "tokens; lower the max length, use bfloat16 or a device with more memory"
        ) from exc
    cap, budget = max(1, count // 2), max(1, (count // 2) * width)
    message = (
        f"out of memory with {count} texts x {width} tokens per batch on "
        f"{loaded.info.device}; continuing with at most {cap} texts per batch"
    )
    if not notices or not notices[-1].startswith("out of memory"):
        notices.append(message)
        if on_notice is not None:
            on_notice(message)
    else:
        notices[-1] = message
    return cap, budget


@dataclass
class _BatchPlan:
    """What every batch of :func:`extract_partial` reads: the tokenized texts, where each text's
    analysed tokens start in the token table (``offset``) and their positions (``position``),
    each token's sample slot (-1: not sampled) and the reusable scratch buffers."""

    tokenized: TokenizedCorpus
    offset: np.ndarray
    position: np.ndarray
    slot: np.ndarray
    buffers: WorkBuffers
    tokens: TokenTable | None = None  # the part's token table (what an observer is shown)


@dataclass
class _Batch:
    """A forward pass's hidden states and where its analysed and sampled tokens are."""

    hidden_states: tuple[torch.Tensor, ...]
    flat: np.ndarray  # analysed tokens' rows in the flattened (B * T) batch, (text, position) order
    pick: np.ndarray  # which of those are sampled
    slots: np.ndarray  # and their sample slots
    rows: np.ndarray | None = None  # the analysed tokens' rows in the part's token table


def _forward_batch(
    loaded: LoadedModel,
    plan: _BatchPlan,
    rows: np.ndarray,
    pad_id: int,
    sample: SampleCandidates,
) -> _Batch:
    """Forward the texts ``rows`` (one padded batch); nothing is reduced or stored yet."""
    ids, mask = pad_batch(plan.tokenized, rows, pad_id)
    width = ids.shape[1]
    tok = np.concatenate([np.arange(plan.offset[t], plan.offset[t + 1]) for t in rows])
    row_of = np.repeat(np.arange(len(rows)), plan.offset[rows + 1] - plan.offset[rows])
    flat = row_of * width + plan.position[tok]  # analysed tokens in the (B * T) padded batch
    pick = np.flatnonzero(plan.slot[tok] >= 0)  # which of them are sampled
    if isinstance(plan.tokenized, MediaTokens):
        hidden_states = media_forward(loaded, plan.tokenized, rows)
    else:
        hidden_states = forward_hidden_states(loaded, ids, mask)
    if len(hidden_states) != sample.num_states or hidden_states[0].shape[-1] != sample.hidden_size:
        raise UnsupportedModelError(
            f"the model returned {len(hidden_states)} hidden states of width "
            f"{hidden_states[0].shape[-1]}, expected {sample.num_states} of width "
            f"{sample.hidden_size}"
        )
    return _Batch(hidden_states, flat, pick, plan.slot[tok][pick], tok)


# Activations (tokens x states x width) from which an extraction on the CPU compiles the moments
# kernel itself when the app's warm-up has not: the kernel's saving per element against eager
# torch, times this many elements, repays a compile from numba's disk cache about twice over and
# one into an empty cache about once (the figures are in docs/performance.md).
COMPILE_MIN_ELEMENTS = 500_000_000

# Float64 bytes of hidden states reduced together by eager torch where a batch does not go state
# by state (GPUs, MPS, other dtypes; see _reduce_batch): a few large operations per batch instead
# of a dozen per state (see RunningStats._fill_states), with bounded scratch memory. CPU groups
# stay within the cores' L2 caches.
REDUCE_GROUP_BYTES = 32 << 20
REDUCE_GROUP_BYTES_CPU = 4 << 20


def _by_state(hidden_states: Sequence[torch.Tensor]) -> bool:
    """Whether a batch is reduced one state at a time (:func:`_reduce_by_state`): all its states
    on the CPU, all float32 or all float64 (what the sample's row copy and numpy's argmin/argmax
    read in place; other dtypes are converted group by group)."""
    dtype = hidden_states[0].dtype
    return dtype in (torch.float32, torch.float64) and all(
        h.device.type == "cpu" and h.dtype == dtype for h in hidden_states
    )


def _reduce_batch(
    plan: _BatchPlan, batch: _Batch, sample: SampleCandidates, observe: Observer | None = None
) -> RunningStats:
    """Reduce one batch's hidden states where they live, then show them to ``observe``; returns
    the batch's statistics.

    On the CPU, state by state (:func:`_reduce_by_state`), with the compiled kernel where it is
    warm. Otherwise consecutive states on one device are gathered (analysed tokens only) into
    one (g, n, d) buffer and reduced together by torch. The sampled tokens' vectors go straight
    to their planned slots (a redone batch writes the same slots again), so an out-of-memory
    error loses nothing: the caller merges the statistics only when the reduction succeeded.
    """
    stats = _reduce_states(plan, batch, sample)
    if observe is not None and len(batch.flat) and plan.tokens is not None:
        rows = batch.rows if batch.rows is not None else np.arange(len(batch.flat))
        observe(BatchStates(batch.hidden_states, batch.flat, rows, plan.tokens.take(rows)))
    return stats


def _reduce_states(plan: _BatchPlan, batch: _Batch, sample: SampleCandidates) -> RunningStats:
    """:func:`_reduce_batch`'s reduction."""
    num_states, d = sample.num_states, sample.hidden_size
    hidden_states, n = batch.hidden_states, len(batch.flat)
    if n and _by_state(hidden_states):
        stats = _reduce_by_state(plan, batch, sample, MOMENTS.applies(hidden_states))
        if stats is None:  # a NaN or an infinity: torch's propagation defines the result
            stats = _reduce_by_state(plan, batch, sample, kernel=False)
            assert stats is not None  # only the kernel's reduction returns None
        return stats
    stats = RunningStats(num_states, d, hidden_states[0].device)
    cpu = hidden_states[0].device.type == "cpu"
    most = max(1, (REDUCE_GROUP_BYTES_CPU if cpu else REDUCE_GROUP_BYTES) // max(1, n * d * 8))
    index: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}
    s0 = 0
    while s0 < num_states:
        device = hidden_states[s0].device  # device_map="auto" spreads states over devices
        # Split what is left evenly (31 states, at most 10 a group: 8, 8, 8, 7, not 10, 10, 10, 1):
        # each group's operations cost about the same.
        left = num_states - s0
        group = -(-left // -(-left // most))
        s1 = s0 + 1
        while s1 < num_states and s1 - s0 < group and hidden_states[s1].device == device:
            s1 += 1
        if device not in index:
            index[device] = (
                torch.from_numpy(batch.flat).to(device),
                torch.from_numpy(batch.pick).to(device),
            )
        flat, pick = index[device]
        x = plan.buffers.take("x", (s1 - s0, n, d), hidden_states[s0].dtype, device)
        for j, h in enumerate(hidden_states[s0:s1]):
            torch.index_select(h.reshape(-1, d), 0, flat, out=x[j])
        stats.add_states(s0, x, plan.buffers)
        if len(pick) == n:  # every analysed token is sampled (a corpus under the sample size)
            sample.write(s0, batch.slots, x)
        elif len(pick):
            sample.write(s0, batch.slots, x.index_select(1, pick))
        s0 = s1
    return stats


def _reduce_by_state(
    plan: _BatchPlan, batch: _Batch, sample: SampleCandidates, kernel: bool
) -> RunningStats | None:
    """:func:`_reduce_batch` on the CPU, one state at a time: its analysed tokens gathered into
    one reused (tokens, d) buffer, reduced straight into the batch's statistics, its sampled
    rows copied from that buffer to their slots while it is still in the core's cache. A few
    calls per state and nothing allocated per batch but the statistics.

    ``kernel``: reduce with the compiled kernel (:meth:`MomentsKernel.reduce_state`); then
    None when an activation is not finite, and the caller reduces the batch again with
    ``kernel=False``: eager torch and numpy (:class:`EagerStates`, the kernel's twin), whose
    propagation of NaN and infinity (torch's) defines the result.
    """
    hidden_states, n, d = batch.hidden_states, len(batch.flat), sample.hidden_size
    cpu = torch.device("cpu")
    stats = RunningStats(sample.num_states, d, cpu)
    rows = stats.state_rows(n)
    x = plan.buffers.take("x", (n, d), hidden_states[0].dtype, cpu)
    values = to_numpy(x, dtype=None)  # the buffer's own memory
    flat = torch.from_numpy(batch.flat)
    # Every analysed token sampled (a corpus under the sample size): the rows go in order, which
    # numpy copies as fast as the kernel and twice as fast as through a list of rows.
    pick = None if len(batch.pick) == n else batch.pick
    eager = None if kernel else EagerStates(x, rows, plan.buffers)
    for s, h in enumerate(hidden_states):
        torch.index_select(h.reshape(-1, d), 0, flat, out=x)
        if kernel:
            MOMENTS.reduce_state(values, s, rows)
        if len(batch.pick):  # eagerly, before the float64 passes push the state out of cache
            sample.write(s, batch.slots, values[None], pick)
        if eager is not None:
            eager.reduce(s)
    return None if kernel and not MOMENTS.finite(rows) else stats


def extract(
    loaded: LoadedModel,
    corpus: Corpus,
    settings: ExtractionSettings | None = None,
    progress: Progress | None = None,
    on_notice: Notice | None = None,
    observe: Observer | None = None,
) -> ExtractionResult:
    """Hidden-state statistics and a token sample of ``loaded`` on ``corpus`` (see the package
    doc); ``observe``: see :func:`extract_partial`."""
    settings = settings or ExtractionSettings()
    started = time.perf_counter()
    # a MediaCorpus (images or clips) stands in for a Corpus: its items are what the model reads
    items = corpus.texts if corpus.kind == "text" else cast("MediaCorpus", corpus).items
    partial = extract_partial(
        loaded, items, settings, progress=progress, on_notice=on_notice, observe=observe
    )
    partial.notices[:0] = list(loaded.layout.notes)
    return finish(partial, corpus, seconds=time.perf_counter() - started)
