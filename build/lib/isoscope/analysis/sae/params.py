"""The SAE analysis's parameters, declared once (:class:`isoscope.engine.params.Interval`) and
gathered in :class:`SaeSettings`: read by ``isoscope sae``'s options, the SAE page's widgets and
the links that carry them. A module without torch, so that the CLI's option defaults load
nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass

from isoscope.engine.errors import InputError
from isoscope.engine.params import MAX_LENGTH, PAGE_LENGTHS, Interval

SAE_PAPERS = (
    "Bricken et al. 2023, Towards Monosemanticity (transformer-circuits.pub); Gao et al. 2024, "
    "Scaling and evaluating sparse autoencoders, arXiv 2406.04093; Rajamanoharan et al. 2024, "
    "Jumping Ahead: JumpReLU SAEs, arXiv 2407.14435; Lieberum et al. 2024, Gemma Scope, "
    "arXiv 2408.05147"
)
DENSE_PAPER = "Sun et al. 2025, Dense SAE Latents Are Features, Not Bugs, arXiv 2506.15679"

# The sidebar extraction's length: the analysis runs the same extraction with the SAE's encoder
# attached, so its outlier dims are those of the pages beside it.
SAE_MAX_LENGTH = Interval(
    2, 8192, MAX_LENGTH.default, integer=True, name="max_length", unit="tokens",
    help="tokens per text (longer texts are cut)", choices=PAGE_LENGTHS,
)  # fmt: skip
# Half the extraction's batch: a batch's feature activations (tokens x SAE width) are built in
# chunks, but the states of all layers of a batch are held while the encoder runs.
SAE_BATCH_SIZE = Interval(
    1, 4096, 16, integer=True, name="batch_size", help="texts per batch at most"
)
# "Dense" latents fire on more than 10 % of tokens (the cut of the dense-latent paper).
DENSE_SHARE = Interval(
    0.001, 1.0, 0.1, step=0.001, name="dense_share",
    help="a feature is dense when it fires on more than this share of tokens",
    citation=DENSE_PAPER,
)  # fmt: skip
# Eight features per dimension: a dimension carried by a few features shows them at the top.
FEATURES_PER_DIM = Interval(
    1, 100, 8, integer=True, name="features_per_dim",
    help="features listed per outlier or massive dimension (largest |loading| first)",
)  # fmt: skip
# The tokens where a dimension is "large": its 32 largest |h[t, d]| over the corpus.
DIM_TOKENS = Interval(
    1, 1024, 32, integer=True, name="dim_tokens",
    help="a dimension's kept share is measured on its this many largest |h[t, d]| tokens",
)  # fmt: skip
# Ten tokens per feature and twenty worst-reconstructed tokens: a table that reads at a glance.
TOP_TOKENS = Interval(
    1, 100, 10, integer=True, name="top_tokens", help="top-activating tokens kept per feature"
)
WORST_TOKENS = Interval(
    1, 1000, 20, integer=True, name="worst_tokens",
    help="worst-reconstructed tokens listed (largest relative error first)",
)  # fmt: skip

TOKEN_KINDS = ("first_position", "massive", "special", "ordinary")


@dataclass(frozen=True)
class SaeSettings:
    """Everything that changes the analysis of one model, one SAE and one corpus, validated
    against the declarations above. ``state``: the isoscope state (0 = emb, i = layer i's
    output) the SAE reads when its files do not say (None: from the files)."""

    max_length: int = SAE_MAX_LENGTH.default
    batch_size: int = SAE_BATCH_SIZE.default
    dense_share: float = DENSE_SHARE.default
    features_per_dim: int = FEATURES_PER_DIM.default
    dim_tokens: int = DIM_TOKENS.default
    top_tokens: int = TOP_TOKENS.default
    worst_tokens: int = WORST_TOKENS.default
    state: int | None = None

    def __post_init__(self) -> None:
        for param in (
            SAE_MAX_LENGTH,
            SAE_BATCH_SIZE,
            DENSE_SHARE,
            FEATURES_PER_DIM,
            DIM_TOKENS,
            TOP_TOKENS,
            WORST_TOKENS,
        ):
            value = getattr(self, param.name)
            if param.integer and (isinstance(value, bool) or not isinstance(value, int)):
                raise InputError(f"{param.label} must be a whole number, got {value!r}")
            param.check(value)
        if self.state is not None and (not isinstance(self.state, int) or self.state < 0):
            raise InputError(
                f"state must be a hidden-state index (0 = emb, 1..L), got {self.state!r}"
            )

    @classmethod
    def from_args(cls, args) -> SaeSettings:
        """The settings ``isoscope sae``'s options give (its flags carry the fields' names)."""
        return cls(**{name: getattr(args, name) for name in cls.__dataclass_fields__})
