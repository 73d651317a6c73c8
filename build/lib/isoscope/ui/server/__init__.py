"""The server process: its start-up, its access rules for visitors, and the warm-ups before the
first visitor arrives.
"""
