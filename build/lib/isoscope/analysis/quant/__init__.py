"""Quantization readiness: activation scales, kurtosis, simulated W8A8/W4 error per site, and the
measured end-to-end loss (docs/quantization.md). ``schemes`` holds the quantizers, ``sites`` finds the
projection inputs from the model itself, ``readiness`` runs the corpus."""
