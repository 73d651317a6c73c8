"""What leaves the dashboard or comes back into it: downloads, the report and the exports, links
that reopen a view, saved analyses.
"""
