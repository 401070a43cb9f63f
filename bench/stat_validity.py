"""Monte Carlo of the gate and the intervals through the real ``aggregate`` and ``decide``.

Run: ``.venv/bin/python bench/stat_validity.py [--reps N] [--quick]`` (1,000 replicates: 820 s
on 2 workers of a shared machine at load average 33; ``--quick`` runs 200). No Prefect:
simulated trial rewards go through the same pure functions the flows call. Prints, each with
its Monte Carlo standard error sqrt(p(1 − p)/R):

1. per-call false accept when the candidate equals the current best (paired, k_se = 1 and
   alpha = 0.05), 30 tasks × 3 trials; and with unequal clusters (one cluster of 20 tasks
   beside 10 singletons) whose effect on the delta is ±0.1 a cluster, mean 0;
2. power when the true gain equals the MDE the gate reports (alpha = 0.05, target 80 %), in
   both worlds;
3. how often the reported 95 % interval holds, and its mean width, beside Hoeffding's, empirical
   Bernstein's (Maurer & Pontil 2009), Clopper–Pearson's (where the observations are 0/1),
   Anderson's (1969), the Student t one, and with unequal clusters the CR1 t interval with
   C − 1 df that the CR2 one replaced, on the same task (or cluster) means, in worlds with
   tasks sorted by category (ids ``<category>-<i>``), the demo's 8 tasks near 0.988, tasks
   lost whole at random, binary rewards with one trial, equal and unequal clusters
   (logistic task and cluster effects), 7–12 tasks with 3–10 trials, and continuous
   rewards; then the reported width over t's and over Anderson's;
4. the exact worst case of how often the reported rule holds (Clopper–Pearson when every value is 0
   or 1, betting otherwise) over three-point distributions on {0, v, 1}, n ≤ 8: no Monte
   Carlo, every sample enumerated.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from honesteval.models import GateConfig, SplitResult, TaskTrials, cluster_key
from honesteval.stats import aggregate, decide
from honesteval.stats._interval import anderson_ci, clopper_pearson_ci, hoeffding_ci, reported_ci


def result(
    rewards: np.ndarray,
    name: str,
    clusters: list[str] | None = None,
    ids: list[str] | None = None,
) -> SplitResult:
    """A (tasks × trials) reward matrix as a val SplitResult, through the real aggregate;
    a NaN reward is an infra_error trial (missing data)."""
    n, k = rewards.shape
    tasks = [
        TaskTrials(
            id=f"t{i:04d}" if ids is None else ids[i],
            cluster=None if clusters is None else clusters[i],
            statuses=["infra_error" if np.isnan(r) else "ok" for r in rewards[i]],
            rewards=[None if np.isnan(r) else float(r) for r in rewards[i]],
        )
        for i in range(n)
    ]
    return aggregate(tasks, candidate=name, fingerprint=name, split="val", n_trials=k)


def beta_rewards(rng: np.random.Generator, means: np.ndarray, trials: int) -> np.ndarray:
    """Continuous rewards in [0, 1] with per-task means ``means`` (Beta, concentration 6)."""
    a = np.clip(means, 1e-3, 1 - 1e-3) * 6.0
    return rng.beta(a[:, None], (6.0 - a)[:, None], size=(means.size, trials))


def rate(hits: int, reps: int) -> str:
    p = hits / reps
    return f"{p:6.1%} ± {math.sqrt(p * (1 - p) / reps):.1%}"


def false_accept(rng: np.random.Generator, reps: int, cfg: GateConfig) -> int:
    accepts = 0
    for _ in range(reps):
        means = rng.uniform(0.2, 0.8, 30)
        cur = result(beta_rewards(rng, means, 3), "cur")
        cand = result(beta_rewards(rng, means, 3), "cand")
        accepts += decide(cur, cand, cfg).accept
    return accepts


BIG_CLUSTER = [20] + [1] * 10  # the world: 11 clusters, 2.2 effective


def cluster_labels(sizes: list[int]) -> list[str | None]:
    """A cluster name per task; a cluster of one is a task without ``cluster``."""
    return [f"c{j}" if size > 1 else None for j, size in enumerate(sizes) for _ in range(size)]


def clustered_pair(
    rng: np.random.Generator, sizes: list[int], gain: float
) -> tuple[SplitResult, SplitResult]:
    """Current and candidate on tasks in clusters: the candidate's effect is gain ± 0.1 by
    cluster (a cluster helped or hurt as a whole), 3 trials, continuous rewards."""
    labels = cluster_labels(sizes)
    n = len(labels)
    means = rng.uniform(0.3, 0.7, n)
    shift = np.repeat(gain + rng.choice([-0.1, 0.1], len(sizes)), sizes)
    cur = result(beta_rewards(rng, means, 3), "cur", labels)
    return cur, result(beta_rewards(rng, means + shift, 3), "cand", labels)


def clustered_false_accept(rng: np.random.Generator, reps: int) -> int:
    cfg = GateConfig(alpha=0.05)
    return sum(decide(*clustered_pair(rng, BIG_CLUSTER, 0.0), cfg).accept for _ in range(reps))


def clustered_power(rng: np.random.Generator, reps: int) -> tuple[float, int]:
    cfg = GateConfig(alpha=0.05)
    pilot = [decide(*clustered_pair(rng, BIG_CLUSTER, 0.0), cfg).mde for _ in range(50)]
    mde = float(np.mean([m for m in pilot if m is not None]))
    hits = sum(decide(*clustered_pair(rng, BIG_CLUSTER, mde), cfg).accept for _ in range(reps))
    return mde, hits


def power_at_mde(rng: np.random.Generator, reps: int) -> tuple[float, int]:
    """Pilot: the MDE the gate reports; then the accept rate when the true gain is that MDE."""
    cfg = GateConfig(alpha=0.05)
    pilot = []
    for _ in range(max(50, reps // 10)):
        means = rng.uniform(0.2, 0.7, 30)
        d = decide(
            result(beta_rewards(rng, means, 3), "cur"),
            result(beta_rewards(rng, means, 3), "cand"),
            cfg,
        )
        pilot.append(d.mde)
    mde = float(np.mean(pilot))
    accepts = 0
    for _ in range(reps):
        means = rng.uniform(0.2, 0.7, 30)
        cur = result(beta_rewards(rng, means, 3), "cur")
        cand = result(beta_rewards(rng, means + mde, 3), "cand")
        accepts += decide(cur, cand, cfg).accept
    return mde, accepts


Draw = tuple[np.ndarray, list[str] | None, list[str] | None]  # rewards, clusters, ids


@dataclass(frozen=True)
class World:
    name: str
    draw: Callable[[np.random.Generator], Draw]
    true_mean: float


def binary_skewed(n: int, trials: int) -> World:
    # per-task pass probability ~ Beta(0.5, 4.5): mean 0.1, most tasks near 0, a few easy
    def draw(rng: np.random.Generator) -> Draw:
        p = rng.beta(0.5, 4.5, n)
        return (rng.random((n, trials)) < p[:, None]).astype(float), None, None

    return World(f"binary skewed (mean .1), {n} tasks × {trials}", draw, 0.1)


def binary_one_trial(n: int, p: float) -> World:
    def draw(rng: np.random.Generator) -> Draw:
        return (rng.random((n, 1)) < p).astype(float), None, None

    return World(f"binary, 1 trial, pass rate {p:g}, {n} tasks", draw, p)


def sorted_categories(n: int, low: float, high: float, trials: int = 3) -> World:
    """Two categories of tasks, half each, ids ``easy-<i>`` / ``hard-<i>``: id order is
    category order, not a random order (the issue's §1 world)."""

    def draw(rng: np.random.Generator) -> Draw:
        hard = rng.random(n) < 0.5
        p = np.where(hard, low, high)
        ids = [f"{'hard' if h else 'easy'}-{i:04d}" for i, h in enumerate(hard)]
        return (rng.random((n, trials)) < p[:, None]).astype(float), None, ids

    return World(
        f"sorted ids, pass .{int(low * 10)}/.{int(high * 10)}, {n} × {trials}",
        draw,
        (low + high) / 2,
    )


def demo_restarts() -> World:
    """The demo's ``restarts``: 8 tasks whose means sit near 0.988, 3 trials each."""

    def draw(rng: np.random.Generator) -> Draw:
        mu = rng.beta(80.0, 1.0, 8)
        a = mu * 400.0
        return rng.beta(a[:, None], (400.0 - a)[:, None], size=(8, 3)), None, None

    return World("demo: 8 tasks near 0.988 × 3", draw, 80.0 / 81.0)


def missing_whole_tasks() -> World:
    """30 tasks × 3, each lost whole (every trial an infra_error) with probability 0.2, at
    random: the interval is over the scored tasks (whether they are representative is the
    missing-data bounds' business, not the interval's)."""

    def draw(rng: np.random.Generator) -> Draw:
        p = rng.beta(1.0, 1.0, 30)
        rewards = (rng.random((30, 3)) < p[:, None]).astype(float)
        rewards[rng.random(30) < 0.2] = np.nan
        return rewards, None, None

    return World("30 tasks × 3, 20 % lost whole at random", draw, 0.5)


def four_clusters() -> World:
    # 4 clusters of 4 tasks: cluster pass rates ~ Beta(1, 3), tasks share their cluster's rate
    def draw(rng: np.random.Generator) -> Draw:
        p = np.repeat(rng.beta(1.0, 3.0, 4), 4)
        rewards = (rng.random((16, 3)) < p[:, None]).astype(float)
        return rewards, [f"c{i // 4}" for i in range(16)], None

    return World("binary, 4 clusters of 4 tasks × 3", draw, 0.25)


def logistic_mean(base: float, sd: float) -> float:
    """E[expit(base + sd·Z)], Z standard normal (Gauss–Hermite, 80 nodes)."""
    z, w = np.polynomial.hermite_e.hermegauss(80)
    return float(np.sum(w / (1.0 + np.exp(-(base + sd * z)))) / math.sqrt(2.0 * math.pi))


def unequal_clusters(
    sizes: list[int], cluster_sd: float, trials: int, base: float = 0.0, lost: float = 0.0
) -> World:
    """Binary trials, logistic task effects (SD 1) and cluster effects (SD ``cluster_sd``),
    ids sorted by cluster (``c0-…`` then the singletons), a task lost whole with probability
    ``lost``: the issue's worlds (one cluster of 20 beside 10 singletons) and small ones."""
    labels = cluster_labels(sizes)
    ids = [f"{label or 'solo'}-{i:03d}" for i, label in enumerate(labels)]

    def draw(rng: np.random.Generator) -> Draw:
        effect = np.repeat(rng.normal(0.0, cluster_sd, len(sizes)), sizes)
        p = 1.0 / (1.0 + np.exp(-(base + effect + rng.normal(0.0, 1.0, len(labels)))))
        rewards = (rng.random((len(labels), trials)) < p[:, None]).astype(float)
        rewards[rng.random(len(labels)) < lost] = np.nan
        return rewards, labels, ids

    shape = "+".join(str(s) for s in sizes if s > 1) + f"+{sum(s == 1 for s in sizes)}×1"
    name = f"clusters {shape}, SD {cluster_sd:g}, × {trials}" + (
        f", {lost:.0%} lost" if lost else ""
    )
    return World(name, draw, logistic_mean(base, math.sqrt(1.0 + cluster_sd**2)))


def continuous(n: int) -> World:
    def draw(rng: np.random.Generator) -> Draw:
        return beta_rewards(rng, rng.beta(2.0, 5.0, n), 3), None, None

    return World(f"continuous Beta, {n} tasks × 3", draw, 2.0 / 7.0)


def empirical_bernstein_ci(x: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """Maurer & Pontil (2009) Thm 4, α/2 a side, clipped to [0, 1]; the whole range below 2."""
    n = x.size
    if n < 2:
        return 0.0, 1.0
    log_term = math.log(4.0 / alpha)
    half = math.sqrt(2.0 * float(np.var(x, ddof=1)) * log_term / n) + 7.0 * log_term / (
        3.0 * (n - 1)
    )
    return max(0.0, float(x.mean()) - half), min(1.0, float(x.mean()) + half)


def observations(r: SplitResult) -> np.ndarray:
    """The means the reported interval is over: scored tasks, or clusters (a task without
    ``cluster`` is a cluster of its own)."""
    means = {t.id: t.mean for t in r.per_task if t.mean is not None}
    if r.stderr_method != "clustered":
        return np.array(list(means.values()))
    by_cluster: dict[str, list[float]] = {}
    for t in r.per_task:
        if t.mean is not None:
            by_cluster.setdefault(cluster_key(t.id, t.cluster), []).append(t.mean)
    return np.array([np.mean(v) for v in by_cluster.values()])


def cr1_t(r: SplitResult) -> tuple[float, float] | None:
    """The interval unequal clusters had before CR2: CR1 (Miller 2024, Eq. 4), C − 1 df."""
    if r.stderr_method != "clustered" or r.ci95_method is None or "CR2" not in r.ci95_method:
        return None
    keys = [cluster_key(t.id, t.cluster) for t in r.per_task if t.mean is not None]
    values = np.array([t.mean for t in r.per_task if t.mean is not None])
    c = len(set(keys))
    sums: dict[str, float] = {}
    for key, v in zip(keys, values - values.mean(), strict=True):
        sums[key] = sums.get(key, 0.0) + v
    se = math.sqrt(c / (c - 1) * sum(v * v for v in sums.values())) / values.size
    half = float(sps.t.ppf(0.975, c - 1)) * se
    return max(0.0, float(values.mean()) - half), min(1.0, float(values.mean()) + half)


METHODS = (
    "reported",
    "Hoeffding",
    "emp. Bernstein",
    "Clopper-P.",
    "Anderson",
    "Student t",
    "CR1 t (before)",
)


def coverage(
    rng: np.random.Generator, world: World, reps: int
) -> tuple[dict[str, int], dict[str, float], dict[str, int]]:
    """Per method: hits of the true mean, summed widths, and how many samples it applied to."""
    hits = dict.fromkeys(METHODS, 0)
    widths = dict.fromkeys(METHODS, 0.0)
    used = dict.fromkeys(METHODS, 0)
    for _ in range(reps):
        rewards, clusters, ids = world.draw(rng)
        r = result(rewards, "x", clusters, ids)
        x = observations(r)
        intervals: dict[str, tuple[float, float] | None] = {
            "reported": r.ci95,
            "Hoeffding": hoeffding_ci(x),
            "emp. Bernstein": empirical_bernstein_ci(x),
            "Clopper-P.": clopper_pearson_ci(int(x.sum()), x.size)
            if np.all((x == 0) | (x == 1))
            else None,
            "Anderson": anderson_ci(x),
            # not distribution-free: shown for what it misses, clipped as it is printed
            "Student t": None
            if r.ci95_t is None
            else (max(0.0, r.ci95_t[0]), min(1.0, r.ci95_t[1])),
            "CR1 t (before)": cr1_t(r),
        }
        for name, iv in intervals.items():
            if iv is None:
                continue
            used[name] += 1
            hits[name] += iv[0] <= world.true_mean <= iv[1]
            widths[name] += iv[1] - iv[0]
    return hits, widths, used


def cell(hits: int, width: float, used: int) -> str:
    if used == 0:
        return f"{'—':>21}"
    p = hits / used
    return f"{p:6.1%} ± {math.sqrt(p * (1 - p) / used):4.1%} {width / used:6.3f}"


def worst_switch_coverage(sizes: tuple[int, ...], grid: int) -> tuple[float, str]:
    """Exact coverage of :func:`reported_ci` under every distribution on {0, v, 1} of a grid:
    the interval depends only on the counts (k0, kv, k1), so enumerate them."""
    worst, where = 1.0, ""
    masses = np.linspace(0.0, 1.0, grid + 1)
    for n in sizes:
        for v in (0.1, 0.3, 0.5, 0.7, 0.9):
            counts = [(k0, n - k0 - k1, k1) for k0 in range(n + 1) for k1 in range(n + 1 - k0)]
            ivs = [
                reported_ci([0.0] * a + [v] * b + [1.0] * c, "tasks").bounds for a, b, c in counts
            ]
            coef = [math.factorial(n) / math.prod(map(math.factorial, k)) for k in counts]
            for p0 in masses:
                for p1 in masses[masses <= 1.0 - p0 + 1e-12]:
                    pv = max(0.0, 1.0 - p0 - p1)
                    mu = p1 + pv * v
                    cov = sum(
                        c * p0**a * pv**b * p1**d
                        for c, (a, b, d), (lo, hi) in zip(coef, counts, ivs, strict=True)
                        if lo <= mu <= hi
                    )
                    if cov < worst:
                        worst, where = cov, f"n={n}, P(0)={p0:.3g}, P({v})={pv:.3g}, P(1)={p1:.3g}"
    return worst, where


def gate_rows(job: str, seed: np.random.SeedSequence, reps: int) -> list[str]:
    """One of the gate's Monte Carlo rows, on its own seeded generator (runs in a worker)."""
    rng = np.random.default_rng(seed)
    if job == "k_se":
        fa = false_accept(rng, reps, GateConfig(k_se=1.0))
        return [f"  paired, k_se = 1      {rate(fa, reps)}   (P(t29 > 1) = {sps.t.sf(1, 29):.1%})"]
    if job == "alpha":
        fa = false_accept(rng, reps, GateConfig(alpha=0.05))
        return [f"  paired, alpha = 0.05  {rate(fa, reps)}   (target 5 %)"]
    if job == "clusters":
        fa = clustered_false_accept(rng, reps)
        mde, hits = clustered_power(rng, reps)
        return [
            f"  clusters 20+10×1, alpha = 0.05, effect ±0.1 a cluster, mean 0  {rate(fa, reps)}"
            "   (target 5 %)",
            f"    its power at the reported MDE ({mde:.4f})  {rate(hits, reps)}   (target 80 %)",
        ]
    mde, hits = power_at_mde(rng, reps)
    return [
        f"\npower when the true gain is the reported MDE ({mde:.4f}), alpha = 0.05:",
        f"  paired                {rate(hits, reps)}   (target 80 %)",
    ]


def world_row(index: int, seed: np.random.SeedSequence, reps: int) -> str:
    world = WORLDS[index]
    h, w, u = coverage(np.random.default_rng(seed), world, reps)
    cells = "".join(f" {cell(h[m], w[m], u[m])}" for m in METHODS)
    mean_width = {m: w[m] / u[m] for m in METHODS if u[m]}
    ratios = "".join(
        f"  {mean_width['reported'] / mean_width[m]:5.2f}×" if m in mean_width else f"{'—':>8}"
        for m in ("Student t", "Anderson")
    )
    partial = (
        f"   (Clopper-P. on {u['Clopper-P.']} samples of 0/1 means)"
        if 0 < u["Clopper-P."] < reps
        else ""
    )
    return f"  {world.name:44}{cells}{ratios}{partial}"


WORLDS = [
    sorted_categories(20, 0.1, 0.9),
    sorted_categories(50, 0.1, 0.9),
    sorted_categories(200, 0.1, 0.9),
    sorted_categories(50, 0.3, 0.7),
    demo_restarts(),
    missing_whole_tasks(),
    binary_one_trial(8, 0.5),
    binary_one_trial(8, 0.9),
    binary_skewed(8, 1),
    binary_skewed(4, 3),
    binary_skewed(8, 3),
    binary_skewed(30, 3),
    four_clusters(),
    unequal_clusters(BIG_CLUSTER, 1.0, 3),
    unequal_clusters(BIG_CLUSTER, 0.5, 3),
    unequal_clusters([10, 10] + [1] * 10, 1.0, 3),
    unequal_clusters([3, 2, 1, 1], 1.0, 10, base=-1.5),
    unequal_clusters([4, 2, 1, 1, 1], 1.0, 5),
    unequal_clusters([5, 3, 2, 1, 1], 1.0, 3, lost=0.2),
    binary_skewed(7, 10),
    continuous(2),
    continuous(4),
    continuous(8),
    continuous(50),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000, help="replicates per cell")
    parser.add_argument("--quick", action="store_true", help="200 replicates, a coarser grid")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--workers", type=int, default=2, help="processes (cells run apart)")
    args = parser.parse_args()
    reps = 200 if args.quick else args.reps
    t0 = time.perf_counter()
    # Every cell draws from its own generator, seeded (seed, cell): the output does not
    # depend on how many workers share the cells.
    jobs = ("k_se", "alpha", "clusters", "power")
    seeds = np.random.SeedSequence(args.seed).spawn(len(jobs) + len(WORLDS))
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        gates = pool.starmap_async(gate_rows, [(job, seeds[i], reps) for i, job in enumerate(jobs)])
        worlds = pool.starmap_async(
            world_row, [(i, seeds[len(jobs) + i], reps) for i in range(len(WORLDS))]
        )
        sizes, grid = ((2, 4, 8), 10) if args.quick else ((2, 3, 4, 5, 6, 8), 40)
        worst, where = worst_switch_coverage(sizes, grid)
        gate_lines, world_lines = gates.get(), worlds.get()

    print(f"Monte Carlo through aggregate/decide, {reps} replicates per cell (± = MC SE)\n")
    print("per-call false accept, candidate == current best, 30 tasks × 3 trials:")
    for lines in gate_lines:
        print("\n".join(lines))
    print(
        "\n95 % interval: how often it holds ± MC SE and mean width, on the same task (cluster) "
        "means:"
    )
    print(
        f"  {'world':44}" + "".join(f"{m:>22}" for m in METHODS) + f"{'rep./t':>9}{'rep./And.':>10}"
    )
    print("\n".join(world_lines))
    print(
        "\nexact worst case of how often the reported rule holds over distributions on "
        f"{{0, v, 1}} (n in {sizes}, masses on a 1/{grid} grid): {worst:.2%} at {where}"
    )
    print(f"\n({time.perf_counter() - t0:.0f} s, {args.workers} workers)")


if __name__ == "__main__":
    main()
