"""The gate's ledger (current best, decisions, test seal, confirmations) and sample-size
planning."""
