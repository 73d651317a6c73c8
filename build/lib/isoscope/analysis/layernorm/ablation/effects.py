"""The records of an ablation: what one set of dims did (:class:`Effect`) and the report of an
ablation against its random controls (:class:`AblationReport`, the ``ablate`` JSON body)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Effect:
    """What one ablation did. Arrays are per hidden state (S,), index 0 = ``emb``.

    ``embedding_cosine``: mean over texts of cos(original, ablated) mean-pooled embedding;
    ``token_cosine``: mean over tokens of cos(original, ablated) token vector;
    ``anisotropy``: mean cosine of random different-text token pairs after ablation;
    ``sts_spearman``: Spearman x 100 of pair cosines vs gold scores after ablation (None without pairs);
    ``mlm_loss``: mean masked-token cross-entropy (None without an MLM head).
    """

    embedding_cosine: np.ndarray
    token_cosine: np.ndarray
    anisotropy: np.ndarray
    sts_spearman: np.ndarray | None = None
    mlm_loss: float | None = None

    def to_dict(self) -> dict:
        return {
            "embedding_cosine": self.embedding_cosine.tolist(),
            "token_cosine": self.token_cosine.tolist(),
            "anisotropy": self.anisotropy.tolist(),
            "sts_spearman": None if self.sts_spearman is None else self.sts_spearman.tolist(),
            "mlm_loss": self.mlm_loss,
        }


@dataclass(frozen=True)
class AblationReport:
    """Effects of ablating ``dims`` in ``norms`` and of each random control (same size)."""

    dims: list[int]
    norms: list[str]
    state_names: list[str]
    effect: Effect
    controls: list[tuple[list[int], Effect]]
    anisotropy_original: np.ndarray
    sts_spearman_original: np.ndarray | None
    mlm_loss_original: float | None
    num_texts: int
    num_masked: int
    seed: int
    seconds: float
    notices: list[str] = field(default_factory=list)
    modality: str = "text"  # "image" | "audio": no LM loss, no STS; the final-state cosine instead

    @property
    def end_metric(self) -> str:
        """What the ablation's damage is read from: ``mlm_loss`` / ``sts_spearman`` when they were
        measured, else (images, audio, text models without an MLM head) ``final_state_cosine``."""
        if self.mlm_loss_original is not None:
            return "mlm_loss"
        if self.sts_spearman_original is not None:
            return "sts_spearman"
        return "final_state_cosine"

    def final_state_cosine(self) -> dict:
        """The mean cosine between the unablated and ablated mean-pooled final state, for the
        ablation and each control (``embedding_cosine`` at the last state)."""
        return {
            "ablation": float(self.effect.embedding_cosine[-1]),
            "controls": [float(e.embedding_cosine[-1]) for _, e in self.controls],
        }

    def control_values(self, key: str) -> np.ndarray:
        """(n_controls, S) for array keys, (n_controls,) for ``mlm_loss``."""
        return np.array([getattr(e, key) for _, e in self.controls], dtype=np.float64)

    def control_summary(self) -> dict:
        """Mean and standard deviation over the random controls, per key."""
        out: dict[str, Any] = {}
        for key in ("embedding_cosine", "token_cosine", "anisotropy", "sts_spearman", "mlm_loss"):
            if getattr(self.effect, key) is None or not self.controls:
                out[key] = None
                continue
            values = self.control_values(key)
            out[key] = {
                "mean": values.mean(axis=0).tolist(),
                "std": values.std(axis=0).tolist(),
                "min": values.min(axis=0).tolist(),
                "max": values.max(axis=0).tolist(),
            }
        return out

    def effect_json(self, effect: Effect) -> dict:
        data = effect.to_dict()
        data["mlm_loss_original"] = self.mlm_loss_original
        data["anisotropy_original"] = self.anisotropy_original.tolist()
        data["anisotropy_change"] = (effect.anisotropy - self.anisotropy_original).tolist()
        if effect.sts_spearman is not None and self.sts_spearman_original is not None:
            data["sts_spearman_original"] = self.sts_spearman_original.tolist()
            data["sts_spearman_change"] = (
                effect.sts_spearman - self.sts_spearman_original
            ).tolist()
        return data

    def to_json(self) -> dict:
        """The ``ablate`` JSON body (without ``ln_outliers``, which the caller adds)."""
        return {
            "dims": self.dims,
            "norms": self.norms,
            "state_names": self.state_names,
            "effect": self.effect_json(self.effect),
            "random_controls": [
                {"dims": d, "effect": self.effect_json(e)} for d, e in self.controls
            ],
            "control_summary": self.control_summary(),
            "num_texts": self.num_texts,
            "num_masked_tokens": self.num_masked,
            "seed": self.seed,
            "seconds": self.seconds,
            "notices": self.notices,
            "modality": self.modality,
            "end_metric": self.end_metric,
            "final_state_cosine": self.final_state_cosine(),
        }

    def frame(self):
        """Long table: condition, kind (ablation / random control), dims, state, metric, value."""
        import pandas as pd  # lazy: a slow import that only the table views need

        rows = []
        for label, kind, dims, eff in [("ablation", "ablation", self.dims, self.effect)] + [
            (f"control {i + 1}", "random control", d, e) for i, (d, e) in enumerate(self.controls)
        ]:
            for key in ("embedding_cosine", "token_cosine", "anisotropy", "sts_spearman"):
                values = getattr(eff, key)
                if values is None:
                    continue
                for s, name in enumerate(self.state_names):
                    rows.append(
                        {
                            "condition": label,
                            "kind": kind,
                            "dims": " ".join(map(str, dims)),
                            "state": name,
                            "metric": key,
                            "value": float(values[s]),
                        }
                    )
            if eff.mlm_loss is not None:
                rows.append(
                    {
                        "condition": label,
                        "kind": kind,
                        "dims": " ".join(map(str, dims)),
                        "state": "",
                        "metric": "mlm_loss",
                        "value": eff.mlm_loss,
                    }
                )
        return pd.DataFrame(rows)
