"""The bench and replay commands end to end: table, JSON, schedule CSV, plots, errors."""

import csv
import json

import pytest

from airflow_gpu_scheduler.cli import main
from airflow_gpu_scheduler.core.scenarios import make_scenario
from airflow_gpu_scheduler.core.simulate import Outcome
from airflow_gpu_scheduler.core.verify import schedule_violations
from airflow_gpu_scheduler.core.workload_files import write_jobs


def _outcomes(rows, policy):
    def num(v):
        return float(v) if v else None

    return {
        r["job_id"]: Outcome(
            r["job_id"], r["gpu_type"] or None, float(r["submit_s"]), num(r["start_s"]), num(r["end_s"])
        )
        for r in rows
        if r["policy"] == policy
    }


def test_bench_writes_json_schedule_and_plots(tmp_path, capsys):
    code = main(
        [
            "bench",
            "--quick",
            "--scenarios",
            "quantization_flood",
            "--policies",
            "fifo,airflow,backfill",
            "--json",
            str(tmp_path / "b.json"),
            "--schedule",
            str(tmp_path / "s.csv"),
            "--plots",
            str(tmp_path / "plots"),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "quantization_flood" in out and "backfill" in out
    [data] = json.loads((tmp_path / "b.json").read_text())["runs"]
    assert data["scenario"] == "quantization_flood" and data["seed"] == 0
    assert set(data["policies"]) == {"fifo", "airflow", "backfill"}
    assert data["upper_bound"] >= max(p["weighted_output"] for p in data["policies"].values())
    for key in (
        "utilization",
        "weighted_output",
        "weighted_goodput",
        "streaming_p95_wait_s",
        "streaming_on_time_rate",
        "deadline_hit_rate",
        "max_wait_s",
        "plan_p95_s",
    ):
        assert key in data["policies"]["fifo"]
    # The schedule CSV alone is enough to re-check the run.
    sc = make_scenario("quantization_flood", quick=True)
    with open(tmp_path / "s.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 * len(sc.jobs)
    for policy in ("fifo", "airflow", "backfill"):
        assert schedule_violations(sc.cluster, sc.jobs, _outcomes(rows, policy), sc.horizon_s) == []
    assert (tmp_path / "plots" / "quantization_flood-gantt.png").stat().st_size > 10_000
    assert (tmp_path / "plots" / "quantization_flood-utilization.png").exists()


def test_replay_of_a_workload_file(tmp_path):
    sc = make_scenario("steady_mix", quick=True)
    write_jobs(sc.jobs, tmp_path / "jobs.csv")
    (tmp_path / "cluster.json").write_text(json.dumps(sc.cluster.to_dict()))
    code = main(
        [
            "replay",
            "--jobs",
            str(tmp_path / "jobs.csv"),
            "--cluster",
            str(tmp_path / "cluster.json"),
            "--horizon-s",
            str(sc.horizon_s),
            "--policies",
            "fifo,milp",
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    assert code == 0
    [data] = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert data["scenario"] == "replay"
    assert data["jobs"] == len(sc.jobs) and set(data["policies"]) == {"fifo", "milp"}


def test_replay_reports_the_bad_line_and_field(tmp_path, capsys):
    (tmp_path / "jobs.csv").write_text(
        "job_id,submit_s,kind,gpus,duration_s\nok,0,training,2,60\nbad,0,training,two,60\n"
    )
    (tmp_path / "cluster.json").write_text(json.dumps({"gpu_types": {"h100": {"count": 4}}}))
    code = main(["replay", "--jobs", str(tmp_path / "jobs.csv"), "--cluster", str(tmp_path / "cluster.json")])
    assert code == 2
    assert "line 3, field 'gpus'" in capsys.readouterr().err


def test_replay_rejects_impossible_jobs_but_runs_the_rest(tmp_path, capsys):
    (tmp_path / "jobs.csv").write_text(
        "job_id,submit_s,kind,gpus,duration_s\nok,0,training,2,60\nhuge,0,training,64,60\n"
    )
    (tmp_path / "cluster.json").write_text(json.dumps({"gpu_types": {"h100": {"count": 4}}}))
    code = main(
        [
            "replay",
            "--jobs",
            str(tmp_path / "jobs.csv"),
            "--cluster",
            str(tmp_path / "cluster.json"),
            "--policies",
            "fifo",
            "--no-bound",
        ]
    )
    assert code == 0
    assert "'huge'" in capsys.readouterr().err


@pytest.mark.slow  # a whole multi-policy bench run
def test_bench_over_seeds_reports_spread_wins_and_worst_run(tmp_path, capsys):
    code = main(
        [
            "bench",
            "--quick",
            "--scenarios",
            "steady_mix",
            "--seeds",
            "0-2",
            "--policies",
            "fifo,backfill,milp",
            "--no-bound",
            "--json",
            str(tmp_path / "b.json"),
            "--markdown",
            str(tmp_path / "b.md"),
        ]
    )
    assert code == 0
    data = json.loads((tmp_path / "b.json").read_text())
    runs = data["runs"]
    assert [r["seed"] for r in runs] == [0, 1, 2]
    # Each seed is its own workload, simulated by every policy.
    assert len({json.dumps(r["policies"]["fifo"], sort_keys=True) for r in runs}) == 3
    summary = data["summary"]["steady_mix"]
    goodput = [r["policies"]["milp"]["weighted_goodput"] for r in runs]
    spread = summary["policies"]["milp"]["weighted_goodput"]
    assert spread["n"] == 3 and spread["low"] == min(goodput) and spread["high"] == max(goodput)
    assert abs(spread["mean"] - sum(goodput) / 3) < 1e-6
    # Wins and the worst run are judged run by run against that run's best other policy.
    deltas = [
        (
            r["policies"]["milp"]["weighted_goodput"]
            / max(r["policies"][p]["weighted_goodput"] for p in ("fifo", "backfill"))
            - 1
        )
        * 100
        for r in runs
    ]
    versus = summary["versus_best_other"]
    assert versus["runs"] == 3 and versus["wins"] == sum(d >= -1e-9 for d in deltas)
    assert abs(versus["worst_delta_pct"] - min(deltas)) < 1e-6
    assert "wins" in capsys.readouterr().out
    assert "| steady_mix |" in (tmp_path / "b.md").read_text()


def test_replay_over_seeds_draws_the_missing_estimates_per_seed(tmp_path):
    sc = make_scenario("steady_mix", quick=True)
    write_jobs(sc.jobs, tmp_path / "jobs.csv")
    (tmp_path / "cluster.json").write_text(json.dumps(sc.cluster.to_dict()))
    code = main(
        [
            "replay",
            "--jobs",
            str(tmp_path / "jobs.csv"),
            "--cluster",
            str(tmp_path / "cluster.json"),
            "--horizon-s",
            str(sc.horizon_s),
            "--policies",
            "backfill",
            "--seeds",
            "0,5",
            "--no-bound",
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    assert code == 0
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert [r["seed"] for r in runs] == [0, 5]
    assert runs[0]["policies"] != runs[1]["policies"]


def test_bench_rejects_a_malformed_seed_range(capsys):
    import pytest

    with pytest.raises(SystemExit):
        main(["bench", "--seeds", "4-1"])
    assert "--seeds must look like" in capsys.readouterr().err


@pytest.mark.slow  # a whole multi-policy bench run
def test_bench_with_the_clairvoyant_yardstick_reports_how_much_of_the_room_milp_closed(tmp_path):
    out = tmp_path / "b.json"
    code = main(
        [
            "bench",
            "--quick",
            "--scenarios",
            "priority_inversion",
            "--policies",
            "backfill,milp,clairvoyant",
            "--no-bound",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    data = json.loads(out.read_text())
    summary = data["summary"]["priority_inversion"]
    goodput = {p: v["weighted_goodput"]["mean"] for p, v in summary["policies"].items()}
    # The yardstick is never "the best other policy" milp is judged against.
    assert summary["versus_best_other"]["best_by_mean"] == "backfill"
    room = goodput["clairvoyant"] - goodput["backfill"]
    expected = (goodput["milp"] - goodput["backfill"]) / room if room > 0 else None
    assert summary["closes_to_clairvoyant"] == expected
