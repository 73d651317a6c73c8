"""Loading released SAEs through the real loader: each format by folder and by Hub id against the
stand-in Hub (only the SAE's own files fetched), the Hub's rules (gated, offline, pickle), SAELens
names, and bad SAEs refused in one line (width, pickle, site, state, malformed sources)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.sae.load import load_sae, on_model, parse_sae_source
from isoscope.engine.errors import InputError, ModelLoadError
from isoscope.engine.inputs.corpus import Corpus
from tests.extraction_checks import TEXTS, direct
from tests.sae_files import (
    planted_sae,
    save_gemma_scope,
    save_outlier_bert,
    save_saelens,
    save_sparsify,
)

CORPUS = Corpus(TEXTS * 3, "sae test texts")
SAVERS = {
    "gemma-scope": lambda sae, root: save_gemma_scope(sae, root / "resid_post" / "layer_0_sae"),
    "saelens": lambda sae, root: save_saelens(sae, root / "blocks.0.hook_resid_post"),
    "sparsify": lambda sae, root: save_sparsify(sae, root),
}


@pytest.fixture(scope="module")
def outlier_model(tmp_path_factory):
    from isoscope.engine.load.models import load_model

    folder = save_outlier_bert(tmp_path_factory.mktemp("outlier-bert"))
    return load_model(str(folder), device="cpu")


@pytest.fixture(scope="module")
def planted(outlier_model):
    vectors, _ = direct(outlier_model, CORPUS.texts)
    return planted_sae(vectors[1].mean(axis=0))


# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("width", [16, 48])
def test_a_width_mismatch_is_refused_in_one_line(outlier_model, tmp_path, width):
    sae = planted_sae(np.ones(width))
    folder = save_saelens(sae, tmp_path / "wrong")
    with pytest.raises(InputError, match=f"width {width} but .* has width 32") as caught:
        on_model(load_sae(str(folder)), outlier_model)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("name", ["sae.pt", "params.pth", "weights.bin", "params.npz"])
def test_pickle_and_numpy_files_are_refused(tmp_path, name):
    folder = tmp_path / "pickled"
    folder.mkdir()
    (folder / name).write_bytes(b"not read")
    (folder / "cfg.json").write_text("{}")
    for source in (folder, folder / name):
        with pytest.raises(ModelLoadError, match="never reads") as caught:
            load_sae(str(source))
        assert "\n" not in str(caught.value)


def test_a_state_the_files_do_not_name_must_be_given(outlier_model, planted, tmp_path):
    folder = save_sparsify(planted, tmp_path)
    local = folder.rename(tmp_path / "my-copy")  # a local copy: the folder's name is no hook
    sae = load_sae(str(local))
    assert sae.state is None
    with pytest.raises(InputError, match="do not say which hidden state"):
        on_model(sae, outlier_model)
    assert on_model(sae, outlier_model, state=1).state == 1
    with pytest.raises(InputError, match="has states 0 \\(emb\\) to 2"):
        on_model(sae, outlier_model, state=3)


@pytest.mark.parametrize(
    "source",
    ["", "org", "org/name", "not a hub id/x/y", "/no/such/folder"],
)
def test_malformed_or_missing_sources_are_refused(source):
    with pytest.raises(InputError):
        load_sae(source)


def test_an_mlp_sae_is_refused(planted, tmp_path):
    folder = save_saelens(planted, tmp_path / "mlp", hook="blocks.0.hook_mlp_out")
    with pytest.raises(ModelLoadError, match="not a residual-stream hidden state"):
        load_sae(str(folder))


# ----------------------------------------------------------------------------- the Hub


def _publish(hub, repo: str, folder, inside: str, **extra: bytes) -> None:
    files = {f"{inside}/{p.name}": p.read_bytes() for p in folder.iterdir() if p.is_file()}
    files.update(extra)
    hub.add_files(repo, files)


@pytest.mark.parametrize("fmt", list(SAVERS))
def test_each_format_opens_by_hub_id_like_by_folder(standin_hub, planted, tmp_path, fmt):
    folder = SAVERS[fmt](planted, tmp_path / "local")
    inside = "resid_post/layer_0_sae" if fmt != "sparsify" else "sae-run/layers.0"
    other = {"resid_post/layer_1_other/params.safetensors": b"x" * 2000}
    _publish(standin_hub, "org/saes", folder, inside, **other)
    from_hub = load_sae(f"org/saes/{inside}")
    from_folder = load_sae(str(folder))
    assert from_hub.state == from_folder.state == 1
    assert from_hub.source == f"org/saes/{inside}"
    for name in ("w_enc", "w_dec", "b_enc", "b_dec"):
        assert torch.equal(getattr(from_hub, name), getattr(from_folder, name))
    assert not standin_hub.downloads("layer_1_other/params.safetensors")  # only this SAE
    assert load_sae(f"org/saes:{inside}").width == from_hub.width  # the colon form too


def test_hub_rules_offline_cache_gated_and_pickle(standin_hub, planted, tmp_path, monkeypatch):
    folder = save_gemma_scope(planted, tmp_path / "g")
    inside = "resid_post/layer_0_width_16k_l0_medium"
    _publish(standin_hub, "org/gated", folder, inside)
    standin_hub.repos["org/gated"].token = "hf_good"
    with pytest.raises(ModelLoadError, match="gated: accept its licence.*HF_TOKEN"):
        load_sae(f"org/gated/{inside}")
    assert not standin_hub.downloads("params.safetensors")
    monkeypatch.setenv("HF_TOKEN", "hf_good")
    assert load_sae(f"org/gated/{inside}").width == planted.w_enc.shape[1]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # now from the cache only
    assert load_sae(f"org/gated/{inside}").state == 1
    with pytest.raises(ModelLoadError, match="not in the local Hugging Face cache"):
        load_sae("org/gated/resid_post/layer_5_elsewhere")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    standin_hub.add_files(
        "org/pickled", {"layer_3/sae_weights.pt": b"evil", "layer_3/cfg.json": b"{}"}
    )
    with pytest.raises(ModelLoadError, match="never reads; nothing was downloaded"):
        load_sae("org/pickled/layer_3")
    assert not standin_hub.downloads("sae_weights.pt")
    with pytest.raises(ModelLoadError, match="has no SAE at 'nowhere'.*resid_post/layer_0"):
        load_sae("org/gated/nowhere")


def test_sources_parse_to_one_canonical_text():
    assert parse_sae_source("org/r@v1:a/b").text == "org/r@v1/a/b"
    assert parse_sae_source("org/r/a/b/").text == "org/r/a/b"
    assert parse_sae_source("org/r@v1/a").repo.revision == "v1"


def test_a_saelens_name_opens_through_the_hub_with_its_neuronpedia_id(
    standin_hub, planted, tmp_path, monkeypatch
):
    from isoscope.analysis.sae import directory

    folder = save_gemma_scope(planted, tmp_path / "g")
    _publish(standin_hub, "org/scope", folder, "resid_post/layer_0_w")
    package = tmp_path / "pkg" / "sae_lens"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "pretrained_saes.yaml").write_text(
        "rel:\n  repo_id: org/scope\n  model: m\n  saes:\n  - id: l0\n"
        "    path: resid_post/layer_0_w\n    neuronpedia: m/0-res\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    directory._directory_file.cache_clear()
    try:
        sae = load_sae("saelens:rel:l0")
    finally:
        directory._directory_file.cache_clear()
    assert sae.source == "org/scope/resid_post/layer_0_w" and sae.state == 1
    assert sae.neuronpedia_id == "m/0-res"
