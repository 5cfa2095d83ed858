"""The bench and replay commands end to end: table, JSON, schedule CSV, plots, errors."""

import csv
import json

from airflow_gpu_scheduler.cli import main
from airflow_gpu_scheduler.core.scenarios import make_scenario
from airflow_gpu_scheduler.core.simulate import Outcome
from airflow_gpu_scheduler.core.verify import schedule_violations
from airflow_gpu_scheduler.core.workload_files import write_jobs


def _outcomes(rows, policy):
    def num(v):
        return float(v) if v else None

    return {r["job_id"]: Outcome(r["job_id"], r["gpu_type"] or None, float(r["submit_s"]), num(r["start_s"]),
                                 num(r["end_s"])) for r in rows if r["policy"] == policy}


def test_bench_writes_json_schedule_and_plots(tmp_path, capsys):
    code = main(["bench", "--quick", "--scenarios", "quantization_flood", "--policies", "fifo,airflow,backfill",
                 "--json", str(tmp_path / "b.json"), "--schedule", str(tmp_path / "s.csv"),
                 "--plots", str(tmp_path / "plots")])
    assert code == 0
    out = capsys.readouterr().out
    assert "quantization_flood" in out and "backfill" in out
    data = json.loads((tmp_path / "b.json").read_text())["scenarios"]["quantization_flood"]
    assert set(data["policies"]) == {"fifo", "airflow", "backfill"}
    assert data["upper_bound"] >= max(p["weighted_output"] for p in data["policies"].values())
    for key in ("utilization", "weighted_output", "streaming_p95_wait_s", "deadline_hit_rate", "max_wait_s",
                "plan_p95_s"):
        assert key in data["policies"]["fifo"]
    # The schedule CSV alone is enough to re-check the run.
    sc = make_scenario("quantization_flood", quick=True)
    rows = list(csv.DictReader(open(tmp_path / "s.csv")))
    assert len(rows) == 3 * len(sc.jobs)
    for policy in ("fifo", "airflow", "backfill"):
        assert schedule_violations(sc.cluster, sc.jobs, _outcomes(rows, policy), sc.horizon_s) == []
    assert (tmp_path / "plots" / "quantization_flood-gantt.png").stat().st_size > 10_000
    assert (tmp_path / "plots" / "quantization_flood-utilization.png").exists()


def test_replay_of_a_workload_file(tmp_path):
    sc = make_scenario("steady_mix", quick=True)
    write_jobs(sc.jobs, tmp_path / "jobs.csv")
    (tmp_path / "cluster.json").write_text(json.dumps(sc.cluster.to_dict()))
    code = main(["replay", "--jobs", str(tmp_path / "jobs.csv"), "--cluster", str(tmp_path / "cluster.json"),
                 "--horizon-s", str(sc.horizon_s), "--policies", "fifo,milp", "--json", str(tmp_path / "r.json")])
    assert code == 0
    data = json.loads((tmp_path / "r.json").read_text())["scenarios"]["replay"]
    assert data["jobs"] == len(sc.jobs) and set(data["policies"]) == {"fifo", "milp"}


def test_replay_reports_the_bad_line_and_field(tmp_path, capsys):
    (tmp_path / "jobs.csv").write_text("job_id,submit_s,kind,gpus,duration_s\nok,0,training,2,60\nbad,0,training,two,60\n")
    (tmp_path / "cluster.json").write_text(json.dumps({"gpu_types": {"h100": {"count": 4}}}))
    code = main(["replay", "--jobs", str(tmp_path / "jobs.csv"), "--cluster", str(tmp_path / "cluster.json")])
    assert code == 2
    assert "line 3, field 'gpus'" in capsys.readouterr().err


def test_replay_rejects_impossible_jobs_but_runs_the_rest(tmp_path, capsys):
    (tmp_path / "jobs.csv").write_text("job_id,submit_s,kind,gpus,duration_s\nok,0,training,2,60\nhuge,0,training,64,60\n")
    (tmp_path / "cluster.json").write_text(json.dumps({"gpu_types": {"h100": {"count": 4}}}))
    code = main(["replay", "--jobs", str(tmp_path / "jobs.csv"), "--cluster", str(tmp_path / "cluster.json"),
                 "--policies", "fifo", "--no-bound"])
    assert code == 0
    assert "'huge'" in capsys.readouterr().err
