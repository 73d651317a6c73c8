"""AppTest: The Position embeddings tab (ui/views/positional/table.py): its three views are lazy, and
Whisper's table of frames gets them too."""

from __future__ import annotations

from tests.app.pages.positional.helpers import media_page, page, titles


def test_position_embedding_views_are_lazy():
    """Arriving draws the cosine and PCA views only; the extreme-dimension and LayerNorm views
    draw once opened, and keep following the positions slider."""
    at = page()
    shown = titles(at)
    assert any("Cosine similarity of position embeddings" in t for t in shown), shown
    assert any("PCA of position embeddings" in t for t in shown), shown
    assert not any("Extreme dimensions" in t or "Embedding LayerNorm" in t for t in shown)
    for view, title in (
        ("Extreme dimensions", "Extreme dimensions of the position vectors"),
        ("Embedding LayerNorm", "Embedding LayerNorm parameters"),
    ):
        at.session_state["pos_emb_view"] = view
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert any(title in t for t in titles(at)), (view, titles(at))
    at.slider(key="pos_emb_n").set_value(16).run()
    assert not at.exception, [e.value for e in at.exception]
    shown = titles(at)
    assert any("Extreme dimensions" in t for t in shown) and any("Cosine" in t for t in shown)
    assert len(at.dataframe) >= 1  # the extreme dims vs outliers table


def test_whisper_table_of_frames_gets_the_table_views(media, tmp_path):
    """Whisper's encoder adds a fixed sinusoidal table of frames: cosine & PCA and the extreme
    dims are drawn from it, with a line saying what a position is."""
    from tests.media_models import save_whisper

    whisper = str(save_whisper(tmp_path / "whisper"))
    at = media_page(whisper, "audio", media["audio"], "Position embeddings")
    assert any("fixed sinusoids" in c.value and "20 ms frame" in c.value for c in at.caption)
    charts = [el.proto.id for el in at.get("plotly_chart")]
    assert any("pos_emb_cos_chart" in key for key in charts), charts
