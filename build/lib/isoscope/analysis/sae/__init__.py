"""Sparse autoencoder features against the geometry (docs/methods.md section 16).

A released sparse autoencoder (SAE) on the residual stream maps a hidden state x to features
f = sigma(W_enc (x - b_dec) + b_enc) and back to x_hat = W_dec f + b_dec (Bricken et al. 2023,
"Towards Monosemanticity"; TopK: Gao et al. 2024, arXiv 2406.04093; JumpReLU: Rajamanoharan et
al. 2024, arXiv 2407.14435; Gemma Scope: Lieberum et al. 2024, arXiv 2408.05147).

- :mod:`~isoscope.analysis.sae.params`: the analysis's parameters and its settings object;
- :mod:`~isoscope.analysis.sae.formats`: the three file formats read (Gemma Scope
  ``params.safetensors``, SAELens ``cfg.json`` + ``sae_weights.safetensors``, EleutherAI
  sparsify ``cfg.json`` + ``sae.safetensors``) and the hook -> isoscope state mapping;
- :mod:`~isoscope.analysis.sae.load`: an SAE source (a local folder, or a Hub id plus the
  SAE's path in the repo) resolved, downloaded with the models' rules and checked against a
  model;
- :mod:`~isoscope.analysis.sae.encode`: the encoder, decoder and a feature's direction;
- :mod:`~isoscope.analysis.sae.scan`: the pass over a corpus (the extraction's own, no second
  forward pass) and what it reports: fidelity by token kind, features against outlier and
  massive dimensions, dense and dead features;
- :mod:`~isoscope.analysis.sae.neuronpedia`: a feature's Neuronpedia page for known releases.
"""
