"""Extreme activations, one analysis each: massive activations in the residual stream (Sun et al.
2024, ``massive``), attention sinks (``sinks``), LLM.int8-style outlier features (``int8``), the
high-norm tokens of vision Transformers (Darcet et al. 2024, ``highnorm``) and the log-scale
histogram their medians come from (``loghist``). Named for what it holds: it was ``decoder/``,
though the sinks, int8 features and high-norm tokens are measured on encoders too."""
