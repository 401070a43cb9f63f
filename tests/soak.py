"""Soak: mixed evaluate / gate / SIGKILL / restart against one long-lived Prefect server.

    python -m tests.soak --minutes 30        (``make soak``; not in CI)

Every step runs the real CLI in a subprocess; about half of them are killed with SIGKILL at a
random point (after a random number of target calls). After every step the campaign checks
that nothing was lost: every ``ok`` trial record on disk before is still there byte for byte,
the state files read, and a gate that finished left exactly one decision line. At the end each
candidate is evaluated once more without faults and its totals must be exact: every trial ok,
and the reward equal to the one computed here from the target's seeded rule.

The same pieces drive ``tests/e2e/test_faults.py``'s SIGKILL test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers import ProjectFactory, stored_trials

#: (split, candidate, fingerprint, task id, seed) of a stored trial
TrialKey = tuple[str, str, str, str, int]

N_TASKS = 8
TRIALS = 2
CANDIDATES = {"c0": 0.3, "c1": 0.5, "c2": 0.7, "c3": 0.9}


def soak_tasks(n_tasks: int = N_TASKS, sleep_s: float = 0.05) -> list[dict[str, Any]]:
    """Seeded pass/fail tasks, and every fourth one flaky (InfraError on its first call)."""
    out = []
    for i in range(n_tasks):
        flaky = i % 4 == 3
        inp = {"behaviour": "flaky", "failures": 1} if flaky else {"behaviour": "seeded"}
        out.append({"id": f"s{i:02d}", "input": inp | {"sleep": sleep_s}, "target": "yes"})
    return out


def expected_reward(tasks: list[dict[str, Any]], quality: float, trials: int, seed0: int) -> float:
    """The reward the target's rule gives (tests.helpers.FAULTY_TARGET): a seeded task passes
    when Random(f"{id}-{seed}").random() < quality; a flaky task always passes in the end."""
    means = []
    for t in tasks:
        if t["input"]["behaviour"] == "flaky":
            means.append(1.0)
            continue
        wins = [random.Random(f"{t['id']}-{seed0 + k}").random() < quality for k in range(trials)]
        means.append(sum(wins) / trials)
    return sum(means) / len(means)


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "honesteval.cli", *args]


def call_lines(root: Path) -> int:
    path = root / "calls.log"
    return len(path.read_bytes().splitlines()) if path.exists() else 0


@dataclass
class Campaign:
    """One project under fire, and the books of what was done to it."""

    root: Path
    env: dict[str, str]
    rng: random.Random
    kills: int = 0
    steps: int = 0
    lost: list[str] = field(default_factory=list)

    def run(self, args: list[str], kill_after_calls: int | None, timeout_s: float = 600) -> int:
        """Run the CLI; with ``kill_after_calls``, SIGKILL it once the target has been called
        that many more times. Returns the exit code (-9 when killed)."""
        start = call_lines(self.root)
        proc = subprocess.Popen(
            cli(*args, "--project", str(self.root)),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + timeout_s
        while kill_after_calls is not None and proc.poll() is None:
            if call_lines(self.root) - start >= kill_after_calls:
                proc.send_signal(signal.SIGKILL)
                self.kills += 1
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        self.steps += 1
        self.last_stdout, self.last_stderr = out.decode(), err.decode()
        if proc.returncode != -signal.SIGKILL and "Traceback" in self.last_stderr:
            self.lost.append(f"traceback from {args}: {self.last_stderr[-500:]}")
        return proc.returncode

    def ok_records(self) -> dict[TrialKey, bytes]:
        out = {}
        for rec in stored_trials(self.root):
            if rec["status"] == "ok":
                key = (
                    rec["split"],
                    rec["candidate"],
                    rec["fingerprint"],
                    rec["task_id"],
                    rec["seed"],
                )
                out[key] = json.dumps(rec, sort_keys=True).encode()
        return out

    def decisions(self) -> int:
        from honesteval.store.state_dir import Store

        return len(Store.for_project(self.root).read_decisions())

    def check(self, ok_before: dict[TrialKey, bytes]) -> dict[TrialKey, bytes]:
        """Nothing lost since ``ok_before``; the state files read. Returns the new ok set."""
        from honesteval.store.state_dir import Store

        store = Store.for_project(self.root)
        try:
            store.read_best(), store.read_seal(), store.read_splits()
        except Exception as exc:
            self.lost.append(f"state unreadable: {exc}")
        now = self.ok_records()  # an ok record may be replaced by a newer ok one (--fresh)
        self.lost += [f"ok record lost: {key}" for key in ok_before if key not in now]
        return now

    def step(self, kill_probability: float = 0.5) -> str:
        """One random evaluate or gate, killed at a random point with ``kill_probability``."""
        cand = self.rng.choice(sorted(CANDIDATES))
        op = self.rng.choice(["evaluate", "gate"])
        kill = (
            self.rng.randint(1, N_TASKS * TRIALS) if self.rng.random() < kill_probability else None
        )
        before, lines = self.ok_records(), self.decisions()
        fresh = ["--fresh"] if op == "evaluate" and self.rng.random() < 0.2 else []
        code = self.run([op, "--candidate", cand, *fresh], kill)
        self.check(before)
        added = self.decisions() - lines
        if op == "gate" and code in (0, 1, 3) and added != 1:
            self.lost.append(f"gate of {cand} exited {code} and logged {added} decisions")
        return f"{op} {cand}: {'killed' if code == -9 else f'exit {code}'}"

    def final_totals(self) -> None:
        """Each candidate once more, no faults: exact totals or it counts as lost."""
        tasks = soak_tasks()
        for cand, quality in sorted(CANDIDATES.items()):
            code = self.run(["evaluate", "--candidate", cand, "--json"], None)
            if code not in (0, 3):
                self.lost.append(f"final evaluate of {cand} exited {code}: {self.last_stderr}")
                continue
            res = json.loads(self.last_stdout)
            want = expected_reward(tasks, quality, TRIALS, 0)
            if res["trials_ok"] != N_TASKS * TRIALS or abs(res["reward"] - want) > 1e-12:
                self.lost.append(
                    f"{cand}: {res['trials_ok']} ok, reward {res['reward']} (expected {want})"
                )


def make_soak_project(base: Path) -> Path:
    return ProjectFactory(base)(
        tasks=soak_tasks(),
        candidates=CANDIDATES,
        config={"trials": TRIALS, "retries": 2, "timeout_s": 30.0, "max_concurrency": 4},
        name="soak",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from honesteval.server.localserver import LocalServer

    base = Path(tempfile.mkdtemp(prefix="honesteval-soak-"))
    root = make_soak_project(base)
    with LocalServer(base / "prefect-home") as server:
        env = {**server.env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        campaign = Campaign(root, env, random.Random(args.seed))
        end = time.monotonic() + 60 * args.minutes
        while time.monotonic() < end:
            print(f"[{campaign.steps:4d}] {campaign.step()}", flush=True)
        campaign.final_totals()
    flaky = sum(1 for t in soak_tasks() if t["input"]["behaviour"] == "flaky") * TRIALS
    print(f"steps run:       {campaign.steps}")
    print(f"trials run:      {call_lines(root)} target calls")
    print(
        f"faults injected: {campaign.kills + flaky} ({campaign.kills} SIGKILLs of the CLI, "
        f"{flaky} InfraErrors)"
    )
    print(f"lost:            {len(campaign.lost)}")
    for item in campaign.lost:
        print(f"  {item}")
    return 1 if campaign.lost else 0


if __name__ == "__main__":
    sys.exit(main())
