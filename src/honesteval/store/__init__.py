"""The state folder ``.honesteval/``: atomic files, the trial logs, and reading what was stored."""
