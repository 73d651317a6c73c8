"""Where results live: the on-disk result cache, saved analyses and what each result was computed
from.
"""
