"""The project: its file (``honesteval.yaml``) and schema, its tasks, frozen split and
candidates."""
