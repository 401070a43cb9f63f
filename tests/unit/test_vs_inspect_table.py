"""bench/vs_inspect.py's own arithmetic: pair-by-pair ratios, the rotation, the table.

The bench itself (whole CLI processes of both tools) never runs in the suite; these build its
table from made-up runs whose ratios are worked out by hand.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import load_bench


@pytest.fixture(scope="module")
def vs() -> ModuleType:
    return load_bench("vs_inspect")


def run(
    vs: ModuleType,
    wall: float,
    tree: float = 100.0,
    server: float = 0.0,
    cpu: float = 1.0,
    load: float = 1.0,
) -> object:
    return vs.Run(wall, cpu, tree, server, tree + server, load=load)


def test_ratios_pair_the_same_round_not_the_medians(vs: ModuleType) -> None:
    # Round 1: 2 s vs 4 s (0.5×); round 2: 6 s vs 3 s (2×): the pairs' median is 1.25×,
    # while the medians' ratio would be 4 / 3.5 = 1.14×.
    assert vs.pair_ratios([2.0, 6.0], [4.0, 3.0]) == [0.5, 2.0]
    assert statistics.median(vs.pair_ratios([2.0, 6.0], [4.0, 3.0])) == pytest.approx(1.25)


def test_ratios_refuse_unpaired_rounds(vs: ModuleType) -> None:
    with pytest.raises(ValueError, match="equal"):
        vs.pair_ratios([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        vs.pair_ratios([], [])


def test_rotation_runs_each_once_a_round_starting_elsewhere_each_round(vs: ModuleType) -> None:
    order = [(r, c) for r, c in vs.rotation(["a", "b", "c"], 3)]
    assert order == [
        (0, "a"), (0, "b"), (0, "c"),
        (1, "b"), (1, "c"), (1, "a"),
        (2, "c"), (2, "a"), (2, "b"),
    ]  # fmt: skip


def test_spread_collapses_only_when_the_rounds_agree(vs: ModuleType) -> None:
    assert vs.spread([1.234, 1.236]) == "1.23–1.24"
    assert vs.spread([1.231, 1.234]) == "1.23"
    assert vs.spread([281.0, 356.0], "{:.0f}") == "281–356"


def test_table_has_a_row_per_cell_and_ratios_against_both_inspect_modes(
    vs: ModuleType,
) -> None:
    cold = vs.Cell("cold-2000", "2,000 cold", 2000)
    rerun = vs.Cell("rerun-2000", "rerun of 2,000, all stored", 2000, rerun=True)
    columns = [
        ("he", "temporary server", False),
        ("up", "`honesteval server` up", False),
        ("nolog", "Inspect `--no-log-samples`", True),
        ("log", "Inspect, logging samples", True),
    ]
    cold_runs = {
        # three rounds; honesteval 3 s each round, Inspect no-log 6/5/4 s, logging 30/20/10 s
        "he": [run(vs, 3.0, tree=360.0)] * 3,
        "up": [run(vs, 2.0, tree=160.0, server=300.0), run(vs, 2.0, 150.0, 350.0),
               run(vs, 2.0, 170.0, 320.0)],
        "nolog": [run(vs, 6.0, 180.0), run(vs, 5.0, 180.0), run(vs, 4.0, 180.0)],
        "log": [run(vs, 30.0, 200.0), run(vs, 20.0, 200.0), run(vs, 10.0, 200.0)],
    }  # fmt: skip
    rerun_runs = {key: [run(vs, 1.0)] * 3 for key, _, _ in columns}
    lines = vs.build_table([(cold, cold_runs), (rerun, rerun_runs)], columns, "cold-2000")

    header, rule, cold_row, rerun_row, memory_row = lines
    assert header == (
        "| cell | temporary server | `honesteval server` up | Inspect `--no-log-samples` "
        "| Inspect, logging samples | load |"
    )
    assert rule == "|---|---|---|---|---|---|"
    cells = [c.strip() for c in cold_row.strip("|").split("|")]
    # pair ratios vs no-log: 3/6, 3/5, 3/4 -> median 0.60, min-max 0.50-0.75; vs logging:
    # 3/30, 3/20, 3/10 -> 0.15, 0.10-0.30; every round took 3 s, so no min-max for the time
    assert cells[1] == "3.00 s [3.00] (0.60× [0.50–0.75] / 0.15× [0.10–0.30])"
    # 2/6, 2/5, 2/4 -> 0.40 (0.33-0.50); 2/30, 2/20, 2/10 -> 0.10 (0.07-0.20)
    assert cells[2] == "2.00 s [2.00] (0.40× [0.33–0.50] / 0.10× [0.07–0.20])"
    # the baselines: medians and their rounds' min-max, no ratio
    assert cells[3:5] == ["5.00 s [4.00–6.00]", "20.00 s [10.00–30.00]"]
    assert cells[5] == "1.0"  # load
    assert rerun_row.startswith(
        "| rerun of 2,000, all stored | 1.00 s [1.00] (1.00× [1.00] / 1.00× [1.00]) |"
    )
    mem = [c.strip() for c in memory_row.strip("|").split("|")]
    assert mem[0] == "peak RSS of the process tree at 2,000"
    assert mem[1] == "360 MB (2.00× / 1.80×)"  # 360 / 180, 360 / 200
    # whole tree: medians of 460, 500, 490 = 490; client 160, server 300–350
    assert mem[2] == "490 MB (160 client + 300–350 server) (2.72× / 2.45×)"
    assert mem[3:5] == ["180 MB", "200 MB"]


def test_no_memory_row_without_its_cell(vs: ModuleType) -> None:
    cell = vs.Cell("start-4", "4 trials cold", 4)
    columns = [("he", "h", False), ("in", "i", True)]
    runs = {"he": [run(vs, 2.0)], "in": [run(vs, 4.0)]}
    lines = vs.build_table([(cell, runs)], columns, "cold-2000")
    assert len(lines) == 3
    assert "| 4 trials cold | 2.00 s [2.00] (0.50× [0.50]) | 4.00 s [4.00] |" in lines[2]


def test_cpu_table_pairs_cpu_seconds_and_has_no_memory_row(vs: ModuleType) -> None:
    cell = vs.Cell("cold-200", "200 cold", 200)
    columns = [("he", "h", False), ("in", "i", True)]
    # wall favours honesteval (2 s vs 4 s), CPU does not (3 s vs 2 s, then 6 s vs 2 s)
    runs = {
        "he": [run(vs, 2.0, cpu=3.0), run(vs, 2.0, cpu=6.0)],
        "in": [run(vs, 4.0, cpu=2.0), run(vs, 4.0, cpu=2.0)],
    }
    lines = vs.build_table([(cell, runs)], columns, "cold-200", metric="cpu_s")
    assert len(lines) == 4  # the memory row follows the cell it is asked for
    # 3/2 and 6/2: 1.5× and 3×
    assert lines[2].startswith("| 200 cold | 4.50 s [3.00–6.00] (2.25× [1.50–3.00]) | 2.00 s")
    lines = vs.build_table([(cell, runs)], columns, None, metric="cpu_s")
    assert len(lines) == 3


def test_client_cpu_table_leaves_the_long_lived_servers_share_out(vs: ModuleType) -> None:
    # A later command of a sitting and one against `honesteval server`: whole-tree CPU
    # 6 s vs 3 s, of which the servers used 3.5 s and 0.5 s: the clients alone 2.5 s each.
    cell = vs.Cell("cold-200", "200 cold", 200)
    columns = [("later", "later", False), ("up", "up", False)]
    runs = {
        "later": [vs.Run(5.0, 6.0, 150.0, 300.0, 450.0, 1.0, 2.5, 3.5)],
        "up": [vs.Run(4.0, 3.0, 150.0, 300.0, 450.0, 1.0, 2.5, 0.5)],
    }
    [_, _, whole] = vs.build_table([(cell, runs)], columns, None, metric="cpu_s")
    [_, _, client] = vs.build_table([(cell, runs)], columns, None, metric="client_cpu_s")
    assert whole == "| 200 cold | 6.00 s [6.00] | 3.00 s [3.00] | 1.0 |"
    assert client == "| 200 cold | 2.50 s [2.50] | 2.50 s [2.50] | 1.0 |"


def test_a_rounds_load_is_the_highest_at_its_commands_starts(vs: ModuleType) -> None:
    # round 1: loads 0.3 and 0.9; round 2: 1.4 and 0.2
    runs = {
        "he": [run(vs, 1.0, load=0.3), run(vs, 1.0, load=1.4)],
        "in": [run(vs, 1.0, load=0.9), run(vs, 1.0, load=0.2)],
    }
    assert vs.round_loads(runs) == [0.9, 1.4]


def test_a_command_started_above_max_load_is_refused_in_one_line(vs: ModuleType) -> None:
    vs.check_load(2.5, 2.5, "round 1 of start-4")  # at the limit: fine
    vs.check_load(9.0, None, "round 1 of start-4")  # no limit
    with pytest.raises(vs.TooLoaded) as refused:
        vs.check_load(2.51, 2.5, "round 2 of cold-200 (he-first)")
    line = str(refused.value)
    assert "\n" not in line
    assert "round 2 of cold-200 (he-first)" in line and "2.51" in line and "2.5" in line


def test_a_refused_bench_exits_3_without_a_table(
    vs: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The machine's load above the limit before anything runs: no command is started.
    monkeypatch.setattr(vs.os, "getloadavg", lambda: (7.0, 5.0, 3.0))
    monkeypatch.setattr(vs, "inspect_version", lambda python: "0.3.285")
    with pytest.raises(SystemExit) as exited:
        vs.main(["--inspect-python", "python", "--max-load", "1.5"])
    assert exited.value.code == vs.EXIT_TOO_LOADED == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("refused: the bench started at a 1-minute load average of 7.00")


def test_timed_commands_write_bytecode_caches_and_call_no_configured_api(
    vs: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A shell with ``PYTHONDONTWRITEBYTECODE`` would have every honesteval module of an
    editable install compiled at every timed command: the commands run without it (and
    without a configured Prefect API), the rest of the environment kept."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    monkeypatch.setenv("HONESTEVAL_BENCH_PROBE", "kept")
    env = vs.base_env(tmp_path / "home")
    assert "PYTHONDONTWRITEBYTECODE" not in env and "PREFECT_API_URL" not in env
    assert env["HONESTEVAL_BENCH_PROBE"] == "kept" and env["PREFECT_HOME"] == str(tmp_path / "home")


def test_a_command_waits_for_the_load_to_fall_before_it_is_timed(vs: ModuleType) -> None:
    loads = iter([3.4, 3.0, 2.6, 2.4, 9.0])
    slept: list[float] = []
    vs.wait_for_quiet(2.5, load=lambda: next(loads), sleep=slept.append)
    assert slept == [2.0, 2.0, 2.0]  # 3.4, 3.0, 2.6 above 2.5; 2.4 is quiet: no more reads
    slept.clear()
    vs.wait_for_quiet(2.5, wait_s=5.0, load=lambda: 9.0, sleep=slept.append)
    assert slept == [2.0, 2.0, 2.0]  # gives up after 5 s (then the load check refuses)
    vs.wait_for_quiet(None, load=lambda: 9.0, sleep=slept.append)  # no limit: no wait
    assert len(slept) == 3
