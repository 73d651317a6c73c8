"""AppTest: Image models on the Positional page (ui/views/positional/grid.py): a ViT's position table on
the patch grid, the row / column probe, and BEiT's note on what it uses instead."""

from __future__ import annotations

from tests.app.pages.positional.helpers import media_page, titles


def test_vit_position_table_on_the_patch_grid(media):
    at = media_page(media["vit"], "images", media["images"], "Position embeddings")
    assert any("4x4 patch rows" in c.value and "[CLS]" in c.value for c in at.caption)
    assert any("patch r2c2" in t for t in titles(at))
    at.number_input(key="pos_grid_row").set_value(0).run()
    assert any("patch r0c2" in t for t in titles(at))
    at.radio(key="pos_grid_mode").set_value("every patch").run()
    assert not at.exception
    assert any("tile (row, column)" in t for t in titles(at))
    assert any("Dosovitskiy" in m.value for m in at.markdown)


def test_vit_row_and_column_probe(media):
    at = media_page(media["vit"], "images", media["images"], "Position probe")
    assert any("Patch row / column probe" in t for t in titles(at))
    frame = at.dataframe[0].value
    assert list(frame.columns[:3]) == ["state", "row_accuracy", "column_accuracy"]
    assert len(frame) == 3  # emb + 2 layers


def test_beit_has_no_table_and_says_what_it_uses(media):
    at = media_page(media["beit"], "images", media["images"], "Position embeddings")
    assert any("relative position bias" in i.value for i in at.info)
