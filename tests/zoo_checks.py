"""The conformance checks of the zoo (``tests/zoo.py``) as plain functions, shared by
``tests/integration/engine/test_zoo.py`` and ``benchmarks/zoo_table.py``."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr
from pathlib import Path

import numpy as np
import torch

TEXTS = [
    "the cat sat on the w3 . w7 w9",
    "a dog , the w1 w2 w5 sat !",
    "w11 w12 w13 the cat on a dog ; w20",
    "the w4 .",
]

CLIP_SECONDS = (0.5, 0.31, 1.0)  # the clips of an audio family (noise at 16 kHz)

# analysis name -> what it runs (in-process, on the loaded model)
ANALYSES = (
    "hidden states",
    "norms",
    "int8",
    "massive + sinks",
    "queries/keys",
    "q/k before RoPE",
    "TUPE",
    "position table",
)


def empirical_causal(model: torch.nn.Module) -> bool:
    """The definition, independently of isoscope.engine.arch: change the last token of a text and
    see whether any earlier position's hidden state moves."""
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 100, (1, 9), generator=gen)
    other = ids.clone()
    other[0, -1] = 5 if int(ids[0, -1]) != 5 else 6
    base = getattr(model, "base_model", model)
    with torch.inference_mode():
        a = base(input_ids=ids, output_hidden_states=True).hidden_states
        b = base(input_ids=other, output_hidden_states=True).hidden_states
    return all(torch.allclose(x[:, :-1], y[:, :-1], atol=1e-5) for x, y in zip(a, b, strict=True))


def hidden_states_match(loaded) -> float:
    """Largest |difference| between isoscope's hidden states of a text and HF's own."""
    from isoscope.engine.extraction import encode_text

    ours, _ = encode_text(loaded, TEXTS[0], max_length=16)
    enc = loaded.tokenizer(TEXTS[0], return_tensors="pt", truncation=True, max_length=16)
    with torch.inference_mode():
        theirs = loaded.encoder(
            input_ids=enc["input_ids"],
            attention_mask=enc["attention_mask"],
            output_hidden_states=True,
        ).hidden_states
    theirs = torch.stack(theirs)[:, 0].float().numpy()
    return float(np.abs(ours - theirs).max())


def wiring_errors(loaded) -> list[str]:
    """The discovered norm -> projection wiring against the module graph: zero a norm's output and
    every projection it is said to feed must receive zeros; feeds of a per-layer pre-norm lie in
    its own block."""
    from isoscope.engine.arch import wiring
    from isoscope.engine.arch.hooks import forward_hooks

    model = loaded.model
    wired = wiring(loaded)
    named = dict(model.named_modules())
    errors = []
    if loaded.layout.modality == "audio":  # a clip's own features (Whisper: log-mel)
        inputs = dict(
            loaded.processor([clips().items[0].data], sampling_rate=16000, return_tensors="pt")
        )
    else:
        inputs = {"input_ids": loaded.tokenizer(TEXTS[1], return_tensors="pt")["input_ids"]}
    for norm in wired.norms:
        if not norm.feeds:
            continue
        if norm.role in ("pre_attn", "pre_mlp") and not all(
            p.startswith(f"{wired.blocks}.{norm.layer}.") for p in norm.feeds_block
        ):
            errors.append(f"{norm.path} ({norm.role}) feeds outside its block: {norm.feeds_block}")
        seen: dict[str, float] = {}

        def record(path, seen=seen):
            def fn(module, args, kwargs):
                x = next(
                    (
                        v
                        for v in (*args, *kwargs.values())
                        if isinstance(v, torch.Tensor) and v.is_floating_point()
                    ),
                    None,
                )
                if x is not None:
                    seen[path] = max(seen.get(path, 0.0), float(x.abs().max()))

            return fn

        def zero(module, args, output):
            return torch.zeros_like(output)

        with (
            forward_hooks({named[norm.path]: zero}),
            forward_hooks({named[p]: record(p) for p in norm.feeds}, pre=True, with_kwargs=True),
            torch.inference_mode(),
        ):
            model(**inputs)
        wrong = [p for p in norm.feeds if seen.get(p, 0.0) != 0.0]
        if wrong:
            errors.append(f"{norm.path} zeroed, yet {wrong} got non-zero inputs")
    return errors


def clips():
    """:data:`CLIP_SECONDS` of noise as an audio corpus (no files)."""
    from isoscope.engine.inputs.media import MediaCorpus, MediaItem

    rng = np.random.default_rng(0)
    items = tuple(
        MediaItem(f"clip{i}.wav", "", rng.normal(0, 0.1, int(s * 16000)).astype(np.float32), 16000)
        for i, s in enumerate(CLIP_SECONDS)
    )
    return MediaCorpus(items, "zoo clips", "audio")


def run_analyses(loaded, bugs_as_cells: bool = False) -> dict[str, str]:
    """Each analysis on the loaded model: ``works`` or ``refused: <the one line>``. Anything but an
    IsoscopeError propagates (a bug), or with ``bugs_as_cells`` becomes ``bug: <Type>: <line>``
    (the table generator lists every family). An audio model reads :func:`clips` where a text
    model reads :data:`TEXTS`."""
    from isoscope.analysis.layernorm.params import ln_params, norms_of
    from isoscope.analysis.massive.int8 import int8_sites
    from isoscope.analysis.massive.scan import scan_massive
    from isoscope.analysis.positional.qk import qk_stats
    from isoscope.analysis.positional.table import position_table_weights
    from isoscope.analysis.positional.tupe import supports_tupe, tupe_summary
    from isoscope.engine.errors import IsoscopeError
    from isoscope.engine.extraction import encode_text

    audio = loaded.layout.modality == "audio"

    def hidden():
        if audio:
            from isoscope.engine.extraction import ExtractionSettings, extract

            extract(loaded, clips(), ExtractionSettings(sample_size=20))
        else:
            encode_text(loaded, TEXTS[0], max_length=16)

    def massive():
        if audio:
            from isoscope.analysis.massive.highnorm import scan_audio

            scan_audio(loaded, clips().items)
        else:
            scan_massive(loaded, TEXTS, max_length=16)

    def norms():
        ln_params(norms_of(loaded))

    def int8():
        if not int8_sites(loaded):
            raise IsoscopeError("no norm output is the input of a projection")

    def quant_sites():
        from isoscope.analysis.quant.sites import discover_sites

        roles = {s.role for s in discover_sites(loaded).sites}
        if "attn_in" not in roles:
            raise AssertionError(f"quantization sites without an attention input: {roles}")
        if "mlp_out" not in roles:  # routed experts are skipped (see sites.py)
            raise IsoscopeError(f"no MLP output site among {sorted(roles)}")

    def tupe():
        why = supports_tupe(loaded)
        if why:
            raise IsoscopeError(why)
        tupe_summary(loaded, TEXTS[:2], max_length=16)

    jobs = {
        "hidden states": hidden,
        "norms": norms,
        "int8": int8,
        "massive + sinks": massive,
        "queries/keys": lambda: qk_stats(loaded, TEXTS, max_length=16),
        "q/k before RoPE": lambda: qk_stats(loaded, TEXTS, max_length=16, rotation="before"),
        "TUPE": tupe,
        "quant sites": quant_sites,
        "position table": lambda: position_table_weights(loaded),
    }
    out = {}
    for name, job in jobs.items():
        try:
            job()
            out[name] = "works"
        except IsoscopeError as exc:
            out[name] = "refused: " + str(exc).splitlines()[0]
        except Exception as exc:
            if not bugs_as_cells:
                raise
            out[name] = f"bug: {type(exc).__name__}: " + (str(exc).splitlines() or [""])[0]
    return out


def cli_smoke(folder: Path, tmp: Path, audio: bool = False) -> tuple[int, str]:
    """``massive`` through the CLI entry point, in-process: (exit status, stderr's error line);
    ``audio``: on a folder of :func:`clips` (``--audio``)."""
    import soundfile

    from isoscope.cli import main

    if audio:
        inputs = ["--audio", str(tmp / "clips")]
        (tmp / "clips").mkdir(exist_ok=True)
        for item in clips().items:
            soundfile.write(str(tmp / "clips" / item.path), item.data, item.rate)
    else:
        texts = tmp / "texts.txt"
        texts.write_text("\n".join(TEXTS) + "\n")
        inputs = ["--texts", str(texts)]
    err = io.StringIO()
    with redirect_stderr(err):
        rc = main(
            [
                "massive",
                "--model",
                str(folder),
                *inputs,
                "--out",
                str(tmp / "m.json"),
                "--device",
                "cpu",
                "--max-length",
                "16",
            ]
        )
    lines = [line for line in err.getvalue().splitlines() if line.startswith("error:")]
    if rc == 0:
        json.loads((tmp / "m.json").read_text())
    return rc, lines[0] if lines else ""
