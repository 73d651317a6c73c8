"""SAELens's release directory read as data from an installed package's folder (a stand-in
package here), never by importing SAELens."""

from __future__ import annotations

import pytest

from isoscope.analysis.sae import directory
from isoscope.analysis.sae.load import parse_sae_source
from isoscope.engine.errors import InputError

YAML = """
gemma-scope-2-270m-pt-res:
  conversion_func: gemma_3
  model: google/gemma-3-270m
  repo_id: google/gemma-scope-2-270m-pt
  saes:
  - id: layer_12_width_16k_l0_medium
    path: resid_post/layer_12_width_16k_l0_medium
    l0: 60
    neuronpedia: gemma-3-270m/12-gemmascope-2-res-16k
  - id: layer_12_width_16k_l0_small
    path: resid_post/layer_12_width_16k_l0_small
"""


@pytest.fixture
def installed(tmp_path, monkeypatch):
    package = tmp_path / "sae_lens"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('never imported')\n")
    (package / "pretrained_saes.yaml").write_text(YAML)
    monkeypatch.syspath_prepend(str(tmp_path))
    directory._directory_file.cache_clear()
    yield
    directory._directory_file.cache_clear()


def test_a_release_resolves_to_its_hub_path_and_neuronpedia_id(installed):
    source = parse_sae_source("saelens:gemma-scope-2-270m-pt-res:layer_12_width_16k_l0_medium")
    assert source.kind == "hub"
    assert source.text == "google/gemma-scope-2-270m-pt/resid_post/layer_12_width_16k_l0_medium"
    assert source.repo.repo_id == "google/gemma-scope-2-270m-pt"
    assert source.neuronpedia == "gemma-3-270m/12-gemmascope-2-res-16k"
    small = parse_sae_source("saelens:gemma-scope-2-270m-pt-res:layer_12_width_16k_l0_small")
    assert small.neuronpedia is None


@pytest.mark.parametrize(
    "text,needle",
    [
        ("saelens:gemma-scope-2-270m-pt-re:layer_12", "no release .*close: gemma-scope-2-270m"),
        ("saelens:gemma-scope-2-270m-pt-res:layer_12_width_16k_l0_mediu", "close: layer_12_width"),
        ("saelens:gemma-scope-2-270m-pt-res", "write saelens:RELEASE:SAE_ID"),
    ],
)
def test_unknown_names_are_one_line_with_close_ones(installed, text, needle):
    with pytest.raises(InputError, match=needle) as caught:
        parse_sae_source(text)
    assert "\n" not in str(caught.value)


def test_without_saelens_the_source_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr(directory, "_directory_file", lambda: None)
    with pytest.raises(InputError, match="pip install sae-lens"):
        parse_sae_source("saelens:any-release:any-id")
