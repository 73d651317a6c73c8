"""The work behind the pages, shared by every session of a server: the one cache idiom, models,
corpora and extractions loaded once, the fair queue heavy work waits in, and the cached analyses
several pages share.
"""
