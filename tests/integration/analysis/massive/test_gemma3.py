"""The five misreadings of a Gemma-3 decoder (issue 24), each on tiny random Gemma-3 checkpoints
(``gemma3_text``, 2 layers, width 64, four norms per layer) saved with the bundled tokenizer and
loaded through ``load_model(folder)``; CLI behaviour through ``isoscope.cli.main`` in-process."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from isoscope.cli import main
from isoscope.engine.load.models import load_model

TEXTS = [
    "The cat sat on the mat.",
    "Summer is warm. Winter is cold.",
    "A much longer sentence, with commas, that goes on for a while before it ends.",
    "Short one",
    "Dogs bark\nbirds sing",
]


def _save(folder, plant=None):
    from transformers import AutoModel, Gemma3TextConfig

    from isoscope.engine.load.models import bundled_tokenizer

    tokenizer = bundled_tokenizer()
    config = Gemma3TextConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        sliding_window=16,
        max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
    )
    torch.manual_seed(0)
    model = AutoModel.from_config(config)
    if plant is not None:
        with torch.no_grad():
            plant(model)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _off_scale_norm(model):
    """Layer 2's pre-attention norm at ~150 x unit scale (Gemma's norms scale by 1 + weight)."""
    model.layers[1].input_layernorm.weight.fill_(149.0)


def _massive_tokens(model):
    """Massive activations on several tokens' embeddings (and so on every state's residual)."""
    from isoscope.engine.load.models import bundled_tokenizer

    tok = bundled_tokenizer()
    emb = model.embed_tokens.weight
    for word, dim, value in (("the", 5, 90.0), ("is", 9, 60.0), (",", 5, 45.0), (".", 20, 70.0)):
        emb[tok.convert_tokens_to_ids(word), dim] = value  # x sqrt(64) = 8 in the embedding scale


@pytest.fixture(scope="module")
def gemma3_dir(tmp_path_factory):
    return _save(tmp_path_factory.mktemp("gemma3"))


@pytest.fixture(scope="module")
def texts_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("gemma3-texts") / "texts.txt"
    path.write_text("\n".join(t.replace("\n", " ") for t in TEXTS) + "\n")
    return path


def _cli(*args: str) -> int:
    return main(list(args))


# (1) called an encoder ------------------------------------------------------------------------


def test_1_a_gemma3_checkpoint_is_read_as_a_decoder(gemma3_dir, texts_file, tmp_path):
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import corpus_from_text
    from isoscope.plots.overview import model_card_rows
    from isoscope.share.report import ReportSettings, build_report

    loaded = load_model(str(gemma3_dir), device="cpu")
    assert loaded.info.model_type == "gemma3_text" and loaded.info.is_causal
    out = tmp_path / "analyze.json"
    rc = _cli(
        "analyze", "--model", str(gemma3_dir), "--texts", str(texts_file), "--out", str(out),
        "--max-length", "32", "--sample-size", "500",
    )  # fmt: skip
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["model"]["is_causal"] is True
    card = {row["field"]: row["value"] for row in model_card_rows(data["model"])}
    assert card["attention"] == "causal (decoder)"
    assert data["settings"]["exclude_first"] is True  # --exclude-first auto: on for a decoder
    result = extract(
        loaded,
        corpus_from_text("\n".join(TEXTS)),
        ExtractionSettings(max_length=32, sample_size=500, exclude_first=True),
    )
    report = build_report(loaded, result, settings=ReportSettings(massive_texts=5))
    massive = report.section("massive")
    assert massive.skipped is None, massive.skipped
    assert massive.findings


# (2) int8 sites: the norms that feed projections; an off-scale site is flagged ----------------


def test_2_int8_sites_are_the_two_pre_norms_of_each_layer(gemma3_dir):
    from isoscope.analysis.massive.int8 import int8_sites

    loaded = load_model(str(gemma3_dir), device="cpu")
    paths = [site.path for site in int8_sites(loaded)]
    assert paths == [
        f"layers.{i}.{norm}"
        for i in range(2)
        for norm in ("input_layernorm", "pre_feedforward_layernorm")
    ]
    # the post norms exist (four per layer) but only normalise block outputs: not sites
    names = dict(loaded.model.named_modules())
    assert "layers.0.post_attention_layernorm" in names
    assert "layers.0.post_feedforward_layernorm" in names


def test_2_an_off_scale_site_is_flagged_in_the_massive_json(tmp_path, texts_file):
    folder = _save(tmp_path / "planted", plant=_off_scale_norm)
    out = tmp_path / "massive.json"
    rc = _cli(
        "massive", "--model", str(folder), "--texts", str(texts_file), "--out", str(out),
        "--max-length", "32",
    )  # fmt: skip
    assert rc == 0
    int8 = json.loads(out.read_text())["int8"]
    assert int8["n_sites"] == 4
    per_site = {s["name"]: s for s in int8["per_site"]}
    assert len(per_site) == 4
    flagged = [name for name, s in per_site.items() if s["off_scale"]]
    assert flagged == ["L2.pre_attn_ln"], per_site
    assert per_site["L2.pre_attn_ln"]["median_abs"] > 50
    unit = [s["median_abs"] for name, s in per_site.items() if name != "L2.pre_attn_ln"]
    assert all(0.3 < m < 1.5 for m in unit), per_site
    assert "does not apply" in int8["verdict"]


# (3) the top 3 of a state are distinct sites ---------------------------------------------------


def test_3_massive_top3_are_distinct_sites_despite_identical_first_positions(gemma3_dir):
    from isoscope.analysis.massive.scan import scan_massive
    from isoscope.engine.extraction import encode_text, tokenize

    loaded = load_model(str(gemma3_dir), device="cpu")
    first_id = int(tokenize(loaded, TEXTS, 32).input_ids[0][0])
    with torch.no_grad():  # the first token ([CLS], as <bos>) carries the largest value
        loaded.encoder.embed_tokens.weight[first_id, 5] = 60.0
    firsts = [encode_text(loaded, t, max_length=32)[0][:, 0] for t in TEXTS]
    for other in firsts[1:]:  # causal: position 0 sees only itself, the same in every text
        np.testing.assert_allclose(other, firsts[0], atol=1e-5)
    m = scan_massive(loaded, TEXTS, max_length=32, sinks=False, int8=False).massive
    for s in range(len(m.state_names)):
        sites = list(zip(m.top_dim[s].tolist(), m.top_position[s].tolist(), strict=True))
        assert len(set(sites)) == 3, (m.state_names[s], sites)
    assert (m.top_dim[0, 0], m.top_position[0, 0]) == (5, 0)


# (4) the massive-activation count and median are exact -------------------------------------------


def test_4_massive_count_and_median_are_exact(tmp_path):
    from isoscope.analysis.massive.scan import scan_massive
    from isoscope.engine.extraction import encode_text

    folder = _save(tmp_path / "massive", plant=_massive_tokens)
    loaded = load_model(str(folder), device="cpu")
    m = scan_massive(loaded, TEXTS, max_length=32, sinks=False, int8=False).massive
    hidden = np.concatenate([encode_text(loaded, t, max_length=32)[0] for t in TEXTS], axis=1)
    magnitude = np.abs(hidden.astype(np.float64))  # (states, all tokens, d)
    median = np.median(magnitude.reshape(magnitude.shape[0], -1), axis=1)
    threshold = np.maximum(100.0, 1000.0 * median)
    count = (magnitude > threshold[:, None, None]).sum(axis=(1, 2))
    assert m.median_exact and m.massive_exact
    np.testing.assert_allclose(m.median_abs, median, rtol=1e-5)
    np.testing.assert_array_equal(m.n_massive, count)
    assert count[0] > len(TEXTS)  # several tokens, not just one per text


# (5) links take a .gguf path; analyze records --exclude-first ----------------------------------


def test_5_a_link_accepts_a_gguf_path(tmp_path):
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    from isoscope.ui.sharing.links import known_model
    from tests.gguf_files import sentencepiece_vocabulary, write_gguf

    vocab = sentencepiece_vocabulary()
    config = Gemma3TextConfig(
        vocab_size=len(vocab["tokens"]),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        sliding_window=16,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    path = write_gguf(Gemma3ForCausalLM(config), tmp_path / "gemma3.gguf", "gemma3", vocab)
    assert known_model(str(path))
    assert not known_model(str(tmp_path / "missing.gguf"))
    loaded = load_model(str(path), device="cpu")  # and it is the decoder the link names
    assert loaded.info.model_type == "gemma3_text" and loaded.info.is_causal


@pytest.mark.parametrize("choice, expected", [("on", True), ("off", False), ("auto", True)])
def test_5_analyze_records_the_exclude_first_choice(
    choice, expected, gemma3_dir, texts_file, tmp_path
):
    out = tmp_path / "analyze.json"
    rc = _cli(
        "analyze", "--model", str(gemma3_dir), "--texts", str(texts_file), "--out", str(out),
        "--max-length", "32", "--sample-size", "500", "--exclude-first", choice,
    )  # fmt: skip
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["settings"]["exclude_first"] is expected
