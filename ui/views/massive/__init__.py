"""The Massive activations & sinks page's body (pages/massive.py), one module per kind of model:
text models in ``text`` (massive activations, attention sinks and LLM.int8 outlier features from
one scan over the corpus), image and speech models in ``media`` (massive activations by carrier
token, high-norm patches or frames, the norms over the image or under the waveform). The
arithmetic lives in isoscope.analysis.massive."""
