"""The planner on queues too big for one MILP: windows, the cycle's LP bound, the scale command."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_gpu_scheduler.cli import main
from airflow_gpu_scheduler.core.planner import MilpPlanner, PlannerConfig
from airflow_gpu_scheduler.core.scale import scale_instance
from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob, split_valid

FOUR = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 1.0}}})


def est(job_id, gpus, estimate, priority, **kw):
    return Job(job_id, 0.0, "batch_inference", gpus, estimate_s=estimate, priority=priority, **kw)


def overbooked(cluster, queued, running, plan):
    """(type, time, busy) wherever the plan plus the running jobs exceed a GPU type's count."""
    by_id = {j.job_id: j for j in queued}
    spans = [(s.gpu_type, s.start_s, s.end_s, by_id[s.job_id].gpus) for s in plan.starts]
    problems = []
    for t in cluster.gpu_types:
        mine = [sp for sp in spans if sp[0] == t.name]
        for _, start, _, _ in mine:
            busy = sum(g for _, a, b, g in mine if a <= start < b)
            busy += sum(
                r.job.gpus for r in running if r.gpu_type == t.name and start < r.start_s + r.job.estimate_s / t.speed
            )
            if busy > t.count:
                problems.append((t.name, start, busy))
    return problems


def test_windows_find_the_known_optimum_the_greedy_plan_misses():
    # The instance of test_planner's known optimum (B and C before A is worth more), plus a
    # low-priority gang that greedy puts after them, with a MILP size limit that forces the
    # windowed search: the first window frees A, B and C together.
    jobs = [est("A", 3, 3600, 5), est("B", 2, 3600, 4), est("C", 2, 3600, 4), est("D", 4, 600, 0.1)]
    whole = MilpPlanner(PlannerConfig(mip_rel_gap=0.0)).plan(FOUR, jobs, [], 0.0)
    windowed = MilpPlanner(PlannerConfig(mip_rel_gap=0.0, max_milp_vars=150, window_vars=150)).plan(FOUR, jobs, [], 0.0)
    assert whole.report.method == "milp" and windowed.report.method == "milp-windows"
    assert windowed.report.subproblems >= 2
    assert windowed.by_job()["A"].start_s == 3600.0 and windowed.by_job()["B"].start_s == 0.0
    assert abs(windowed.report.objective - whole.report.objective) < 1e-6 * whole.report.objective
    assert windowed.report.objective > windowed.report.greedy_objective


def test_lp_bound_is_above_every_plan_of_the_cycle():
    jobs = [est("A", 3, 3600, 5), est("B", 2, 3600, 4), est("C", 2, 3600, 4)]
    planner = MilpPlanner(PlannerConfig(mip_rel_gap=0.0))
    plan = planner.plan(FOUR, jobs, [], 0.0)
    bound, n_vars = planner.lp_bound(FOUR, jobs, [], 0.0)
    assert n_vars > 3 and bound >= plan.report.objective - 1e-6
    assert bound <= plan.report.objective * 1.5  # and it is a bound of this model, not something loose


def test_zero_budget_still_returns_the_greedy_plan():
    inst = scale_instance(60)
    plan = MilpPlanner(PlannerConfig(time_limit_s=0.0)).plan(inst.cluster, inst.queued, inst.running, inst.now_s)
    assert plan.report.method == "greedy" and plan.report.subproblems == 0
    assert len(plan.starts) + len(plan.unplanned) == 60


def test_scale_instances_are_valid_deterministic_and_grow_with_the_queue():
    small, again, big = scale_instance(100), scale_instance(100), scale_instance(1000)
    assert small == again
    for inst in (small, big):
        valid, errors = split_valid(inst.queued, inst.cluster)
        assert errors == [] and len(valid) == len(inst.queued)
        busy = {t.name: sum(r.job.gpus for r in inst.running if r.gpu_type == t.name) for t in inst.cluster.gpu_types}
        assert all(0 < busy[t.name] <= t.count for t in inst.cluster.gpu_types)
    assert len(big.cluster.gpu_types) == 3 and 450 <= big.cluster.total_gpus <= 550


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(5, 80), seed=st.integers(0, 10_000), max_vars=st.integers(20, 600))
def test_windowed_plans_respect_capacity_and_never_lose_to_greedy(n, seed, max_vars):
    inst = scale_instance(n, seed)
    cfg = PlannerConfig(time_limit_s=1.0, window_time_limit_s=0.2, max_milp_vars=max_vars, window_vars=max_vars)
    plan = MilpPlanner(cfg).plan(inst.cluster, inst.queued, inst.running, inst.now_s)
    assert {s.job_id for s in plan.starts} | set(plan.unplanned) == {j.job_id for j in inst.queued}
    assert plan.report.objective >= plan.report.greedy_objective - 1e-6
    assert overbooked(inst.cluster, inst.queued, inst.running, plan) == []
    assert all(s.start_s >= inst.now_s - 1e-6 for s in plan.starts)


def test_running_jobs_are_respected_by_the_windowed_search():
    running = [RunningJob(est("r", 4, 1800, 1), "h100", start_s=-600.0)]  # expected end: 1200
    jobs = [est(f"j{i}", 1 + i % 2, 900, 1 + i % 3) for i in range(12)]
    plan = MilpPlanner(PlannerConfig(max_milp_vars=100, window_vars=60)).plan(FOUR, jobs, running, 0.0)
    assert min(s.start_s for s in plan.starts) >= 1200.0
    assert overbooked(FOUR, jobs, running, plan) == []


def test_scale_command_prints_and_writes_rows(tmp_path, capsys):
    code = main(
        [
            "scale",
            "--jobs",
            "30,60",
            "--budget-s",
            "1",
            "--json",
            str(tmp_path / "s.json"),
            "--plots",
            str(tmp_path / "plots"),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "vs LP" in out and "\n    30 " in out and "\n    60 " in out
    rows = json.loads((tmp_path / "s.json").read_text())["rows"]
    assert [r["jobs"] for r in rows] == [30, 60]
    for r in rows:
        assert r["lp_bound"] >= r["objective"] - 1e-6 >= r["greedy_objective"] - 2e-6
        assert r["full_variables"] > 0 and r["peak_rss_mb"] > 0
    assert (tmp_path / "plots" / "scale.png").stat().st_size > 10_000


def test_scale_command_rejects_bad_sizes(capsys):
    for bad in ("ten", "0,5", ""):
        try:
            main(["scale", "--jobs", bad])
        except SystemExit as exit_:
            assert exit_.code == 2
        else:
            raise AssertionError(f"--jobs {bad!r} was accepted")
    assert "--jobs" in capsys.readouterr().err
