"""Run a model over a corpus once and keep what every analysis needs: :class:`ExtractionResult`.

Pipeline: tokenize every text (truncated to ``max_length``), sort by length, run batches of at
most ``token_budget`` padded tokens (and ``batch_size`` texts) under ``torch.inference_mode()``
with ``output_hidden_states=True``, and reduce the hidden states of each batch *on the model's
device*: the analysed tokens of one state at a time on the CPU (a few consecutive states at a
time elsewhere: at most ``REDUCE_GROUP_BYTES`` in float64) are gathered into one reused buffer
and folded into streaming float64 statistics
(:class:`isoscope.engine.extraction.stats.RunningStats`, Chan's parallel update).
Only those per-batch reductions ((S, d) vectors) and the sampled token vectors leave the device;
hidden states are never stacked or copied to the host whole. If a batch runs out of memory (CUDA,
MPS or CPU), it is halved and retried, later batches stay at the smaller size, and one notice says
so; nothing already computed is lost.

Token sample (pairwise metrics, projections): every analysed token gets a priority, a seeded
64-bit hash of ``(seed, text index, position)`` (splitmix64, :func:`token_priority`); the sample
is the ``k`` tokens with the smallest priorities, ``k = min(sample_size, budget cap, tokens)``
where the budget cap keeps ``S * k * d * 4`` bytes within ``sample_budget_bytes``. The rule does
not depend on batching or on how the corpus is split across processes or machines. Since the
priorities depend only on token identity, a part's sample is known once it is tokenized
(:meth:`SampleCandidates.planned`): each sampled token's vectors are written once, into their final
slot, as its batch is reduced.

Partial API (for split or distributed runs, e.g. the Ray engine)::

    part = extract_partial(loaded, texts_subset, settings, text_ids=global_ids)  # any subset
    part.merge(other_part)                    # any grouping/order; returns part
    result = finish(part, corpus)             # -> ExtractionResult, == extract(loaded, corpus)

- ``extract_partial(loaded, texts, settings=None, *, text_ids=None, progress=None,
  on_notice=None) -> PartialExtraction``: ``texts`` are this part's texts, ``text_ids`` their
  indices in the full corpus (default ``0..len-1``). A part may be empty or contain texts that
  produce no tokens.
- :class:`PartialExtraction` (picklable; everything on the CPU): ``stats`` (RunningStats),
  ``sample`` (:class:`SampleCandidates`: ``priority`` uint64 (m,), ``text_id`` int64 (m,),
  ``position`` int32 (m,), ``vectors`` float32 (S, m, d); at most ``limit`` lowest priorities),
  ``tokens`` (list of :class:`TokenTable` chunks), ``text_ids``, ``truncated``, ``notices``,
  ``settings``, ``model`` (ModelInfo dict), ``model_fingerprint``, ``seconds``.
  ``merge(other)`` folds another part in (Chan merge of the statistics, the ``limit`` lowest
  priorities of both samples, token chunks appended); parts must cover disjoint texts.
- ``finish(partial, corpus, *, seconds=None) -> ExtractionResult``: checks that the parts cover
  every text of ``corpus`` exactly once, orders tokens by (text, position), and builds the result.
  Statistics equal the single-process ones to float64 rounding; the sample is identical.

``extract(loaded, corpus, settings)`` is ``finish(extract_partial(loaded, corpus.texts,
settings), corpus)``.
"""

from isoscope.engine.extraction.batches import encode_text, forward_batches, mean_pooled
from isoscope.engine.extraction.forward import (
    COMPILE_MIN_ELEMENTS,
    REDUCE_GROUP_BYTES,
    REDUCE_GROUP_BYTES_CPU,
    BatchStates,
    Notice,
    Observer,
    extract,
    extract_partial,
    forward_hidden_states,
    is_out_of_memory,
    pad_batch,
    pad_rows,
    pad_token_id,
    residual_states,
    run_encoder,
)
from isoscope.engine.extraction.partial import PartialExtraction, finish
from isoscope.engine.extraction.sample import SampleCandidates, sample_limit, token_priority
from isoscope.engine.extraction.tokenization import TokenizedCorpus, tokenize
from isoscope.engine.extraction.types import (
    EXTRACT_VERSION,
    ExtractionResult,
    ExtractionSettings,
    TokenTable,
)

__all__ = [
    "COMPILE_MIN_ELEMENTS",
    "EXTRACT_VERSION",
    "REDUCE_GROUP_BYTES",
    "REDUCE_GROUP_BYTES_CPU",
    "BatchStates",
    "ExtractionResult",
    "ExtractionSettings",
    "Notice",
    "Observer",
    "PartialExtraction",
    "SampleCandidates",
    "TokenTable",
    "TokenizedCorpus",
    "encode_text",
    "extract",
    "extract_partial",
    "finish",
    "forward_batches",
    "forward_hidden_states",
    "is_out_of_memory",
    "mean_pooled",
    "pad_batch",
    "pad_rows",
    "pad_token_id",
    "residual_states",
    "run_encoder",
    "sample_limit",
    "token_priority",
    "tokenize",
]
