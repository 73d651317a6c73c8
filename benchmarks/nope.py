"""Timings and numbers of the positional lab, printed as JSON.

- variance lab (Chi et al.) at the page's defaults (causal + bidirectional on the same models)
  and at the CLI's defaults, warm (transformers' GPT-2 code already imported);
- position probe and TUPE decomposition on the default model and bundled corpus.

Run: .venv/bin/python benchmarks/nope.py
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from isoscope.engine.environment import use_offline_environment  # noqa: E402 (after the path insert)

use_offline_environment()


def main() -> None:
    import numpy as np

    from isoscope.analysis.positional.nope import NopeSettings, variance_lab, variance_lab_pair
    from isoscope.analysis.positional.table import ProbeSettings, probe_result
    from isoscope.analysis.positional.tupe import tupe_summary
    from isoscope.engine.environment import quiet_libraries
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import bundled_corpus
    from isoscope.engine.load.models import load_model

    quiet_libraries()
    report: dict = {"cpu_count": os.cpu_count(), "load_average": os.getloadavg()[0]}
    variance_lab(
        NopeSettings(d_model=32, layers=1, heads=2, seq_len=16, seeds=1)
    )  # warm-up: imports
    page = NopeSettings(seq_len=256)
    started = time.perf_counter()
    causal, bidir = variance_lab_pair(page)
    report["variance_lab_page_defaults"] = {
        "settings": "width 256, 4 layers, 4 heads, seq 256, 3 seeds x 2 sequences, causal + bidirectional",
        "seconds": round(time.perf_counter() - started, 2),
        "causal_slopes": np.round(causal.slopes, 3).tolist(),
        "bidirectional_slopes": np.round(bidir.slopes, 3).tolist(),
        "layer1_measured_over_theory_geomean": round(
            float(np.exp(np.log(causal.attn_mean[0] / causal.theory).mean())), 3
        ),
    }
    started = time.perf_counter()
    cli = variance_lab(NopeSettings())
    report["variance_lab_cli_defaults"] = {
        "settings": "width 256, 4 layers, 4 heads, seq 512, 3 seeds x 2 sequences, causal",
        "seconds": round(time.perf_counter() - started, 2),
        "slopes": np.round(cli.slopes, 3).tolist(),
        "residual_slopes": np.round(cli.resid_slopes, 3).tolist(),
        "fit_range": list(cli.fit_range),
        "weight_stds": {k: round(v, 5) for k, v in cli.weight_stds.items()},
    }

    loaded = load_model("default", device="cpu")
    corpus = bundled_corpus()
    result = extract(loaded, corpus, ExtractionSettings())
    started = time.perf_counter()
    probe = probe_result(result, ProbeSettings())
    report["probe_default_model"] = {
        "seconds_all_states": round(time.perf_counter() - started, 2),
        "accuracy": dict(zip(probe.state_names, np.round(probe.accuracy, 3).tolist(), strict=True)),
        "baseline": round(probe.chance, 3),
        "n_train_tokens": probe.n_train,
        "n_test_tokens": probe.n_test,
    }
    started = time.perf_counter()
    summary = tupe_summary(loaded, corpus.texts, max_length=64, max_texts=32)
    report["tupe_default_model"] = {
        "seconds_32_texts": round(time.perf_counter() - started, 2),
        "max_abs_error": summary.max_abs_error,
        "max_abs_logit": summary.max_abs_logit,
        "term_share": {k: round(v, 3) for k, v in summary.term_share().items()},
        "term_share_cls_row": {k: round(v, 3) for k, v in summary.term_share("cls_row").items()},
        "term_share_cls_column": {
            k: round(v, 3) for k, v in summary.term_share("cls_column").items()
        },
        "remainder_share": round(summary.remainder_share(), 3),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
