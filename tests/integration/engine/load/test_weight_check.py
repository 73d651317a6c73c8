"""A checkpoint's weights are its own, or the load says so (isoscope.engine.load.weight_check).

Tiny random checkpoints of several families are saved, their state-dict keys renamed the ways
real checkpoints are (a DDP ``module.``, a Lightning ``model.``, torch.compile's ``_orig_mod.``,
chains of them; layers renamed ``blocks.*``; keys dropped; a tensor of another shape) and re-saved
as safetensors, then loaded through the real loader: a wrapper prefix loads the very same weights
and the card says it was stripped; anything else the hidden states read refuses with one line
naming how many are missing; what no hidden state reads (a pooler, a T5 decoder) is allowed and
named on the card."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from isoscope.engine.load.models import load_model
from isoscope.engine.load.weight_check import WeightsMismatchError
from tests import zoo

pytestmark = pytest.mark.integration

FAMILIES = ("bert", "gpt2", "llama", "qwen2", "t5")  # learned / rotary positions, an enc-dec
WRAPPERS = ("module.", "model.", "_orig_mod.", "module._orig_mod.", "model.module.")
LAYER_NAMES = ("encoder.layer.", "layers.", "h.", "block.")  # how the families name their blocks


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    folders = {}
    for family in FAMILIES:
        folders[family] = zoo.build(family, tmp_path_factory.mktemp(family))
    return folders


def rewrite(folder: Path, out: Path, edit) -> Path:
    """A copy of ``folder`` whose safetensors state dict is ``edit(state dict)``."""
    shutil.copytree(folder, out)
    for path in out.glob("*.safetensors"):
        tensors = edit(load_file(path))
        save_file(tensors, str(path), metadata={"format": "pt"})
    return out


def state(loaded) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in loaded.model.state_dict().items()}


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("family", FAMILIES)
def test_a_wrapper_prefix_loads_the_same_weights_and_the_card_says_it_was_stripped(
    family, wrapper, checkpoints, tmp_path
):
    plain = load_model(str(checkpoints[family]), device="cpu")
    assert plain.info.weights.startswith("trained (all "), plain.info.weights
    folder = rewrite(
        checkpoints[family], tmp_path / "ckpt", lambda sd: {wrapper + k: v for k, v in sd.items()}
    )
    mapped = load_model(str(folder), device="cpu")
    if wrapper == f"{plain.model.base_model_prefix}.":  # a head model's names: transformers' own
        assert "keys mapped" not in mapped.info.weights
    else:
        assert f"keys mapped: stripped prefix {wrapper!r}" in mapped.info.weights
    assert mapped.info.weights.startswith("trained (all "), mapped.info.weights
    want, got = state(plain), state(mapped)
    assert want.keys() == got.keys()
    assert all(torch.equal(want[k], got[k]) for k in want), "another tensor than the checkpoint's"
    # the mapped load is another load of the same files: never the cache entry of the plain one
    assert mapped.fingerprint != plain.fingerprint or "keys mapped" not in mapped.info.weights


def _rename_layers(sd: dict) -> dict:
    out = {}
    for key, value in sd.items():
        for name in LAYER_NAMES:
            key = key.replace(name, "blocks.")
        out[key] = value
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_renamed_layers_refuse_with_how_many_are_missing(family, checkpoints, tmp_path):
    folder = rewrite(checkpoints[family], tmp_path / "ckpt", _rename_layers)
    renamed = [k for k in load_file(next(folder.glob("*.safetensors"))) if "blocks." in k]
    with pytest.raises(WeightsMismatchError) as caught:
        load_model(str(folder), device="cpu")
    message = str(caught.value)
    assert "\n" not in message
    total = len(load_model(str(checkpoints[family]), device="cpu").model.state_dict())
    if family != "t5":  # T5: the renamed decoder blocks are not read, only the encoder's count
        assert f"{len(renamed)} of {total} weights" in message, message
    assert "not in the checkpoint" in message and "blocks." in message
    assert "random weights" in message


@pytest.mark.parametrize("family", FAMILIES)
def test_randomly_dropped_weights_refuse_and_are_counted(family, checkpoints, tmp_path):
    keys = sorted(load_file(next(checkpoints[family].glob("*.safetensors"))))
    # weights inside the blocks the hidden states pass through (T5: the encoder's)
    read = [k for k in keys if any(n in k for n in LAYER_NAMES) and not k.startswith("decoder.")]
    dropped = set(random.Random(family).sample(read, 3))
    folder = rewrite(
        checkpoints[family],
        tmp_path / "ckpt",
        lambda sd: {k: v for k, v in sd.items() if k not in dropped},
    )
    with pytest.raises(WeightsMismatchError, match=r"^'.*': 3 of \d+ weights .* expects are not"):
        load_model(str(folder), device="cpu")


@pytest.mark.parametrize("family", FAMILIES)
def test_a_weight_of_another_shape_refuses(family, checkpoints, tmp_path):
    keys = sorted(load_file(next(checkpoints[family].glob("*.safetensors"))))
    blocks = ("layers.0.", "layer.0.", "h.0.", "encoder.block.0.")  # T5: the encoder's
    victim = next(
        k for k in keys if k.startswith(blocks) or ".layer.0." in k and "decoder" not in k
    )

    def shrink(sd):
        sd[victim] = sd[victim][..., :3].contiguous() if sd[victim].dim() else sd[victim]
        return sd

    folder = rewrite(checkpoints[family], tmp_path / "ckpt", shrink)
    with pytest.raises(WeightsMismatchError, match="have another shape there") as caught:
        load_model(str(folder), device="cpu")
    assert victim in str(caught.value)


def test_what_no_hidden_state_reads_may_be_missing_and_the_card_names_it(checkpoints, tmp_path):
    """A BERT pooler and a T5 decoder are not read: loaded, and named on the card."""
    no_pooler = rewrite(
        checkpoints["bert"],
        tmp_path / "bert",
        lambda sd: {k: v for k, v in sd.items() if not k.startswith("pooler.")},
    )
    loaded = load_model(str(no_pooler), device="cpu")
    assert "2 that no hidden state depends on are not in it" in loaded.info.weights
    assert "pooler.dense.bias" in loaded.info.weights
    no_decoder = rewrite(
        checkpoints["t5"],
        tmp_path / "t5",
        lambda sd: {k: v for k, v in sd.items() if not k.startswith("decoder.block.")},
    )
    loaded = load_model(str(no_decoder), device="cpu")
    assert "not in it and stay random: decoder.block." in loaded.info.weights


def test_a_name_held_with_and_without_the_prefix_is_not_guessed(checkpoints, tmp_path):
    def both(sd):
        first = sorted(sd)[0]
        out = {"module." + k: v for k, v in sd.items()}
        out[first] = sd[first].clone()  # the plain name too
        return out

    folder = rewrite(checkpoints["gpt2"], tmp_path / "ckpt", both)
    with pytest.raises(WeightsMismatchError, match="both with and without the prefix 'module.'"):
        load_model(str(folder), device="cpu")


def test_a_masked_lm_head_the_checkpoint_lacks_refuses_the_mlm_load(tiny_bert_dir):
    """head="mlm" reads the logits: a base checkpoint's missing head is refused (the ablation
    then uses the base model), while the base load of the same folder is whole."""
    with pytest.raises(WeightsMismatchError, match=r"BertForMaskedLM expects .*cls\.predictions"):
        load_model(str(tiny_bert_dir), device="cpu", head="mlm")
    assert load_model(str(tiny_bert_dir), device="cpu").info.weights.startswith("trained (all ")


def test_built_at_random_says_random(tiny_bert_dir):
    for source in ("random:bert:layers=2,width=32,heads=2", f"random-like:{tiny_bert_dir}"):
        loaded = load_model(source, device="cpu")
        assert loaded.info.random_init and loaded.info.weights.startswith("random init")


def test_the_bundled_model_loads_whole(minilm):
    assert minilm.info.weights.startswith("trained (all "), minilm.info.weights
