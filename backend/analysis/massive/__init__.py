"""Extreme activations, one analysis each: massive activations in the residual stream (Sun et al.
2024: ``massive`` holds the statistics, ``carriers`` the tokens that carry them, ``magnitudes`` one
text's |h|, ``first_position`` the first position's share of the geometry), attention sinks
(``sinks``), LLM.int8-style outlier features and their sites (``int8``), the outliers inside the
mixers (``inner``), the one pass over a text corpus that measures the first three together
(``scan``), the high-norm tokens of vision Transformers (Darcet et al. 2024, ``highnorm``) and the
log-scale histogram their medians come from (``loghist``). The sinks, int8 features and high-norm
tokens are measured on encoders too."""
