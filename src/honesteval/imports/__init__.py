"""Results run elsewhere, stored as honesteval trials: Inspect AI logs
(:mod:`honesteval.imports.inspect_logs`)."""
