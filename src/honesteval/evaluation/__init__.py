"""Running an evaluation without Prefect: the trial plan, one trial start to finish, retries,
the running tally, progress listeners and the pre-flight checks."""
