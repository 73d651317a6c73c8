"""Hub ids downloaded on demand, against the stand-in Hub (tests/standin_hub.py): no internet."""

from __future__ import annotations

import json

import pytest

from isoscope.engine.errors import InputError, ModelLoadError
from isoscope.engine.load import hub as hubmod
from isoscope.engine.load.models import load_model
from isoscope.engine.load.source import parse_source
from isoscope.engine.serve.access import SOURCE_REFUSED, AccessPolicy

REPO = "org/tiny-bert"


def _weights_downloads(standin) -> list:
    return standin.downloads("model.safetensors")


def _incomplete_files(tmp_path) -> list:
    return [p for p in (tmp_path / "hf").rglob("*") if p.name.endswith(".incomplete")]


def test_download_then_analyze_records_the_commit(standin_hub, tiny_bert_dir):
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import bundled_corpus

    sha = standin_hub.add_folder(REPO, tiny_bert_dir, **{"modeling_evil.py": b"raise SystemExit"})
    reports = []
    loaded = load_model(REPO, device="cpu", progress=lambda d, t: reports.append((d, t)))
    assert loaded.info.revision == sha and loaded.info.to_dict()["revision"] == sha
    assert loaded.weights_dir is not None and loaded.weights_dir.name == sha
    assert not (loaded.weights_dir / "modeling_evil.py").exists()  # never code files
    done, total = reports[-1]
    assert done == total > (tiny_bert_dir / "model.safetensors").stat().st_size
    assert [d for d, _ in reports] == sorted(d for d, _ in reports)  # bytes only grow
    result = extract(loaded, bundled_corpus(), ExtractionSettings(sample_size=200, max_length=16))
    assert result.model["revision"] == sha  # saved analyses and reports carry the model card
    again = load_model(f"{REPO}@{sha}", device="cpu")  # a pinned commit in the cache: no network
    assert again.info.revision == sha
    assert len(_weights_downloads(standin_hub)) == 1


def test_a_pinned_revision_loads_that_commit(standin_hub, tiny_bert_dir, tiny_gpt2_dir):
    first = standin_hub.add_folder(REPO, tiny_bert_dir)
    standin_hub.repos[REPO].refs["v1"] = first
    second = standin_hub.add_folder(REPO, tiny_gpt2_dir)
    assert load_model(REPO, device="cpu").info.revision == second
    tagged = load_model(f"{REPO}@v1", device="cpu")
    assert tagged.info.revision == first and tagged.info.model_type == "bert"
    assert load_model(f"{REPO}@{first}", device="cpu").info.is_causal is False


def test_gated_repo_needs_a_token(standin_hub, tiny_bert_dir, monkeypatch):
    """As on the real Hub, a gated repo's metadata is public and its files answer 401
    ``GatedRepo``: the user is told about the licence and HF_TOKEN, not to run it again."""
    from huggingface_hub import HfApi

    standin_hub.add_folder(REPO, tiny_bert_dir)
    standin_hub.repos[REPO].token = "hf_good"
    assert HfApi(endpoint=standin_hub.url).model_info(REPO).gated  # no token needed
    with pytest.raises(ModelLoadError, match="gated: accept its licence.*HF_TOKEN") as caught:
        load_model(REPO, device="cpu")
    assert "again to resume" not in str(caught.value)
    assert not _weights_downloads(standin_hub)
    with pytest.raises(ModelLoadError, match="gated: accept its licence.*HF_TOKEN"):
        hubmod.config_folder(parse_source(REPO))  # the sidebar's look at config.json
    monkeypatch.setenv("HF_TOKEN", "hf_good")
    assert load_model(REPO, device="cpu").info.revision


def test_unknown_repo_and_revision(standin_hub, tiny_bert_dir):
    with pytest.raises(ModelLoadError, match="no Hub repo 'org/missing'"):
        load_model("org/missing", device="cpu")
    standin_hub.add_folder(REPO, tiny_bert_dir)
    with pytest.raises(ModelLoadError, match="has no revision 'nope'"):
        load_model(f"{REPO}@nope", device="cpu")


@pytest.fixture
def small_chunks(monkeypatch):
    """4 KiB download chunks (10 MB by default): progress and resumption within a tiny file."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "DOWNLOAD_CHUNK_SIZE", 4096)


def test_a_dropped_connection_resumes_with_a_range_request(
    standin_hub, tiny_bert_dir, small_chunks
):
    standin_hub.add_folder(REPO, tiny_bert_dir)
    standin_hub.drop_after["model.safetensors"] = 4096
    loaded = load_model(REPO, device="cpu")
    gets = _weights_downloads(standin_hub)
    assert [g[2] for g in gets] == [None, "bytes=4096-"]
    assert loaded.info.num_parameters > 0


def test_a_cancelled_download_resumes_where_it_stopped_and_is_never_seen_complete(
    standin_hub, tiny_bert_dir, tmp_path, small_chunks
):
    standin_hub.add_folder(REPO, tiny_bert_dir)
    weights = (tiny_bert_dir / "model.safetensors").stat().st_size

    def progress(done, total):  # stop once the weights are under way (the UI's stop button)
        return total < weights or done < total - weights // 2

    with pytest.raises(hubmod.DownloadCancelled, match="next run fetches only the rest"):
        load_model(REPO, device="cpu", progress=progress)
    assert _incomplete_files(tmp_path) == []
    snapshots = list((tmp_path / "hf" / "hub").glob("models--org--tiny-bert/snapshots/*"))
    assert snapshots and not (snapshots[0] / "model.safetensors").exists()
    assert hubmod.cached_snapshot(parse_source(REPO)) is None  # incomplete: not cached
    (part,) = (tmp_path / "hf" / "hub").rglob("*" + hubmod.PART_SUFFIX)
    kept = part.stat().st_size
    assert 0 < kept < weights
    configs = len(standin_hub.downloads("config.json"))
    reports = []
    load_model(REPO, device="cpu", progress=lambda d, t: reports.append((d, t)))
    assert len(standin_hub.downloads("config.json")) == configs  # only what is missing
    # the second run asked for the rest only: the stand-in served the bytes from `kept` on
    assert [g[2] for g in _weights_downloads(standin_hub)] == [None, f"bytes={kept}-"]
    assert not part.exists() and reports[-1][0] == reports[-1][1]
    blob = (snapshots[0] / "model.safetensors").resolve()
    assert blob.read_bytes() == (tiny_bert_dir / "model.safetensors").read_bytes()


def test_a_part_that_is_not_the_file_is_never_renamed_into_the_cache(
    standin_hub, tiny_bert_dir, tmp_path, small_chunks
):
    standin_hub.add_folder(REPO, tiny_bert_dir)
    weights = (tiny_bert_dir / "model.safetensors").stat().st_size

    def progress(done, total):
        return total < weights or done < total - weights // 2

    with pytest.raises(hubmod.DownloadCancelled):
        load_model(REPO, device="cpu", progress=progress)
    (part,) = (tmp_path / "hf" / "hub").rglob("*" + hubmod.PART_SUFFIX)
    part.write_bytes(b"\0" * part.stat().st_size)  # bytes that are not the file's
    with pytest.raises(ModelLoadError, match="do not match the Hub's hash"):
        load_model(REPO, device="cpu")
    assert not part.exists() and hubmod.cached_snapshot(parse_source(REPO)) is None
    assert load_model(REPO, device="cpu").info.num_parameters > 0  # fetched again, whole


def test_pickle_only_repo_is_refused_before_any_download(standin_hub):
    standin_hub.add_files(
        REPO, {"config.json": b'{"model_type": "bert"}', "pytorch_model.bin": b"\x80" * 2000}
    )
    with pytest.raises(ModelLoadError, match="only pickle weights.*nothing was downloaded"):
        load_model(REPO, device="cpu")
    assert [r for r in standin_hub.requests if "/resolve/" in r[1]] == []


def test_auto_map_repo_is_refused_before_weights(standin_hub, tiny_bert_dir):
    config = json.loads((tiny_bert_dir / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_evil.EvilModel"}
    standin_hub.add_folder(REPO, tiny_bert_dir, **{"config.json": json.dumps(config).encode()})
    with pytest.raises(ModelLoadError, match="auto_map.*never runs; no weights were downloaded"):
        load_model(REPO, device="cpu")
    assert _weights_downloads(standin_hub) == []


def test_short_disk_space_is_refused_before_weights(standin_hub, tiny_bert_dir, monkeypatch):
    standin_hub.add_folder(REPO, tiny_bert_dir)
    monkeypatch.setattr(hubmod, "free_disk_bytes", lambda folder: 1000)
    with pytest.raises(ModelLoadError, match=r"MB free: free some space.*nothing was downloaded"):
        load_model(REPO, device="cpu")
    assert _weights_downloads(standin_hub) == []


def test_a_visitor_is_refused_the_same_way_whatever_exists(standin_hub, tiny_bert_dir):
    standin_hub.add_folder(REPO, tiny_bert_dir)
    policy = AccessPolicy(shared=True, hub_allow=("google/*", "Qwen/Qwen3-*"))
    messages = set()
    for source in (REPO, "org/does-not-exist", f"random-like:{REPO}"):
        with pytest.raises(InputError) as refused:
            policy.check_model_source(source)
        messages.add(str(refused.value))
    assert messages == {SOURCE_REFUSED}
    assert standin_hub.requests == []  # decided before any network call
    allowed = AccessPolicy(shared=True, hub_allow=("org/tiny-*",), quota_gb=1e-6)
    assert allowed.check_model_source(REPO) == REPO
    with pytest.raises(ModelLoadError, match="download quota"):
        load_model(REPO, device="cpu", quota_bytes=allowed.quota_bytes)
    assert _weights_downloads(standin_hub) == []


def test_offline_mode_and_no_network_use_the_cache(standin_hub, tiny_bert_dir, monkeypatch):
    sha = standin_hub.add_folder(REPO, tiny_bert_dir)
    load_model(REPO, device="cpu")
    seen = len(standin_hub.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert load_model(REPO, device="cpu").info.revision == sha
    assert len(standin_hub.requests) == seen  # offline: not one request
    with pytest.raises(ModelLoadError, match="not in the local Hugging Face cache and HF_HUB_OFF"):
        load_model("org/other", device="cpu")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    assert load_model(REPO, device="cpu").info.revision == sha  # cache fallback
    with pytest.raises(ModelLoadError, match="cannot reach the Hugging Face Hub.*not in the local"):
        load_model("org/other", device="cpu")


def test_a_model_too_big_for_memory_is_refused_before_its_weights(
    standin_hub, tiny_bert_dir, monkeypatch
):
    from isoscope.engine.load import preflight

    standin_hub.add_folder(REPO, tiny_bert_dir)
    monkeypatch.setattr(preflight, "free_memory", lambda device: 1000)
    with pytest.raises(ModelLoadError, match=r"does not fit: .* GiB free.*a smaller model"):
        load_model(REPO, device="cpu")
    assert standin_hub.header_reads("model.safetensors")  # read the header ...
    assert _weights_downloads(standin_hub) == []  # ... not the weights


def test_the_sidebar_knows_a_hub_decoder_before_the_download(standin_hub, tiny_gpt2_dir):
    from isoscope.engine.load.models import source_is_causal

    standin_hub.add_folder("org/tiny-gpt2", tiny_gpt2_dir)
    assert source_is_causal("org/tiny-gpt2@main")
    assert standin_hub.downloads("config.json") and _weights_downloads(standin_hub) == []
    assert hubmod.cached_snapshot(parse_source("org/tiny-gpt2@main")) is None  # a config only


def test_the_time_preflight_comes_with_the_tokenizer_before_the_weights(standin_hub, tiny_bert_dir):
    from isoscope.engine.load import preflight

    standin_hub.add_folder(REPO, tiny_bert_dir)
    seen = []

    def on_preflight(parameters, folder):
        tokenizer_files = sorted(p.name for p in folder.iterdir() if "tokenizer" in p.name)
        seen.append((parameters, tokenizer_files, len(_weights_downloads(standin_hub))))

    loaded = load_model(REPO, device="cpu", on_preflight=on_preflight)
    census = preflight.folder_census(tiny_bert_dir)
    assert seen == [
        (sum(census.values()), ["tokenizer.json", "tokenizer_config.json"], 0)
    ]  # once, before the weights
    assert loaded.info.num_parameters > 0
    load_model(REPO, device="cpu", on_preflight=on_preflight)  # cached: from the folder's headers
    assert len(seen) == 2 and seen[1][0] == seen[0][0]


def test_the_ray_driver_downloads_an_uncached_hub_id_once_before_ray_starts(
    standin_hub, tiny_bert_dir, monkeypatch
):
    import contextlib

    from isoscope.engine.extraction import ExtractionSettings, ray_cluster, ray_engine, ray_plan
    from isoscope.engine.inputs.corpus import Corpus

    standin_hub.add_folder(REPO, tiny_bert_dir)
    standin_hub.add_folder("org/other", tiny_bert_dir)
    cached_when_ray_starts = []

    class RayStarted(Exception):
        pass

    @contextlib.contextmanager
    def session(options):  # stands in for Ray: what the workers would find in the cache
        cached_when_ray_starts.append(hubmod.cached_snapshot(parse_source(REPO)))
        raise RayStarted
        yield

    monkeypatch.setattr(ray_cluster, "ray_session", session)
    corpus = Corpus(("One text.", "Another text."), "two")
    reports = []
    with pytest.raises(RayStarted):
        ray_engine.run_ray_extraction(
            ray_cluster.ModelSpec(REPO), corpus, download_progress=lambda d, t: reports.append(d)
        )
    assert cached_when_ray_starts[0] is not None and reports
    assert len(_weights_downloads(standin_hub)) == 1
    settings = ExtractionSettings(max_length=16)
    plan = ray_plan.plan_chunks(ray_cluster.ModelSpec(REPO), corpus, settings, workers=2)
    assert sorted(i for chunk in plan.chunks for i in chunk) == [0, 1]  # with its tokenizer
    with pytest.raises(ModelLoadError, match="download quota"):
        ray_engine.run_ray_extraction(ray_cluster.ModelSpec("org/other", quota_bytes=1), corpus)
    assert len(cached_when_ray_starts) == 1  # refused before Ray, and before the weights
    assert not [r for r in standin_hub.downloads("model.safetensors") if "org/other" in r[1]]
