"""How long work takes and how it is cut: the one batching rule, this device's measured speeds, the
rule from them to an estimate at a new size, and the progress protocol with its time left.
"""
