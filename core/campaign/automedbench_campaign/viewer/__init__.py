"""Offline HTML pages: one run (`automedbench view`, `view.html` in each run folder) and a campaign site."""
