"""The frame every page runs inside: the sidebar and its selection, the session's slots, lazy tabs,
the cache panel, and what a page shows on an error nobody planned for.
"""
