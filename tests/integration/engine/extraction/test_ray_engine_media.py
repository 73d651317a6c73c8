"""The Ray engine on images and audio clips equals the single-process engine: the driver plans
whole local batches with the model's layout (group-norm clips one length per batch), the workers
get the decoded items, and the result keeps the inputs' kind and classes. One Ray test starts and
stops its own local instance (``ray.init(num_cpus=2)``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.engine.extraction import ExtractionSettings, extract, extract_partial, finish
from isoscope.engine.extraction.ray_cluster import ModelSpec, RayOptions
from isoscope.engine.extraction.ray_engine import run_ray_extraction
from isoscope.engine.extraction.ray_plan import plan_chunks
from isoscope.engine.extraction.ray_pool import below_threshold, sample_is_complete
from isoscope.engine.inputs.media import load_media_folder
from isoscope.engine.load.models import load_model
from tests.integration.engine.extraction.test_ray_engine import assert_same_result
from tests.media_models import audio_folder, image_folder, save_audio_model, save_image_model

ray = pytest.importorskip("ray")
SETTINGS = ExtractionSettings(batch_size=2, sample_size=50)


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    root = tmp_path_factory.mktemp("ray-media")
    return {
        "dino": str(save_image_model("dinov2-reg", root / "dino")),
        "w2v": str(save_audio_model(root / "w2v")),
        "images": load_media_folder(image_folder(root / "images", 5), "image"),
        "clips": load_media_folder(
            audio_folder(root / "clips", (0.5, 0.3, 0.5, 0.4, 0.3)), "audio"
        ),
    }


@pytest.fixture
def ray_local():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_planned_audio_chunks_reproduce_one_process(media):
    """Group-norm clips: every planned chunk is a run of whole local batches of one length, so
    the merged parts equal one process exactly."""
    loaded = load_model(media["w2v"], device="cpu")
    clips = media["clips"]
    want = extract(loaded, clips, SETTINGS)
    plan = plan_chunks(ModelSpec(media["w2v"]), clips, SETTINGS, workers=2)
    assert sorted(np.concatenate(plan.chunks).tolist()) == list(range(len(clips)))
    merged = None
    for chunk in reversed(plan.chunks):
        part = extract_partial(loaded, [clips.items[i] for i in chunk], SETTINGS, text_ids=chunk)
        if plan.threshold is not None:
            part.sample = below_threshold(part.sample, plan.threshold)
        merged = part if merged is None else merged.merge(part)
    assert sample_is_complete(merged, plan.threshold)
    assert_same_result(finish(merged, clips), want)


def _one_thread_extract(model: str, corpus):
    """The local result with one CPU thread, as each worker runs: wav2vec2's convolutions sum in
    a thread-dependent order (float32 rounding), unlike the text models' matmuls at this size."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return extract(load_model(model, device="cpu"), corpus, SETTINGS)
    finally:
        torch.set_num_threads(threads)


def test_two_ray_workers_on_images_and_clips_equal_one_process(media, ray_local):
    for model, corpus in ((media["dino"], media["images"]), (media["w2v"], media["clips"])):
        want = _one_thread_extract(model, corpus)
        got = run_ray_extraction(
            ModelSpec(model), corpus, SETTINGS, RayOptions(address=None, workers=2)
        )
        assert_same_result(got, want)
        assert got.extra["inputs"] == want.extra["inputs"]
        assert got.extra["engine"]["workers"] == 2
