"""Eve-compatible evaluation steps: the ``steps`` scorer, its judges, its per-trial workspace and
the ``scalar_score_expression`` language."""
