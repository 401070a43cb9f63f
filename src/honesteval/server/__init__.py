"""Local Prefect servers (temporary, long-lived, throw-away), what their boot may skip, keeping
their home bounded, and settings for flow runs inside the caller's process."""
