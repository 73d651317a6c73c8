"""Cached decoder analyses for the "Massive activations & sinks" page (one pass per setting)."""

from __future__ import annotations

from backend.massive import DecoderScan, TextMagnitudes, scan_decoder, text_magnitudes
from ui.common import get_corpus, get_model, memo
from ui.progress import progress_bar


def get_scan(n_texts: int, max_length: int) -> DecoderScan:
    """Massive activations, sinks and int8 features of the selected model on the first
    ``n_texts`` texts of the selected corpus (memoised per model, corpus and settings)."""
    loaded = get_model()
    corpus = get_corpus()
    texts = corpus.texts[:n_texts]

    def compute() -> DecoderScan:
        with progress_bar(f"Scanning {loaded.info.display_name}:", "texts") as progress:
            return scan_decoder(loaded, texts, max_length=max_length, progress=progress)

    return memo("massive.scan", (loaded.fingerprint, corpus.sha, n_texts, max_length), compute)


def get_text_view(text: str, max_length: int) -> TextMagnitudes:
    """|h| of every hidden state, position and dim of one text (memoised)."""
    loaded = get_model()
    return memo(
        "massive.text",
        (loaded.fingerprint, text, max_length),
        lambda: text_magnitudes(loaded, text, max_length),
    )
