"""The gate: its settings (``config``), its steps (``run``), its ledger of the best, decisions,
confirmations and seal (``ledger``; the replayed search ledger: ``search``), and its power
and sample sizes (``power``)."""
