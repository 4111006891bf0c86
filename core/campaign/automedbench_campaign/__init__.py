"""automedbench-campaign: many runs at once and what is read from them — the run matrix (sweep, on local
processes or Ray), the stored-run table, the leaderboard with its analyses and HTML report, the campaign
site, the offline run page (`view`, `view.html`), the warm evaluator and the LLM error-code tagger.

A plugin of the `automedbench` entry-point group like any third party's (`plugin.py`); the core never
imports it.
"""
