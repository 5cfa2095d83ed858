"""Property-based tests: random workloads never crash the core, and every plan and
schedule respects capacity and accounts for every job."""

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from airflow_gpu_scheduler.core.planner import MilpPlanner, PlannerConfig
from airflow_gpu_scheduler.core.policies import POLICY_NAMES, make_policy
from airflow_gpu_scheduler.core.simulate import simulate
from airflow_gpu_scheduler.core.verify import schedule_violations
from airflow_gpu_scheduler.core.workload import Cluster, GpuType, Job, JobKind, WorkloadError, split_valid

TYPES = ("h100", "a100", "l4")
clusters = st.lists(
    st.tuples(st.sampled_from(TYPES), st.integers(1, 8), st.sampled_from([0.4, 1.0, 2.0])),
    min_size=1,
    max_size=3,
    unique_by=lambda t: t[0],
).map(lambda ts: Cluster(tuple(GpuType(n, c, s) for n, c, s in ts)))


@st.composite
def jobs(draw, n_max=12):
    out = []
    for i in range(draw(st.integers(0, n_max))):
        submit = draw(st.floats(0, 4 * 3600, allow_nan=False))
        duration = draw(st.floats(30, 3 * 3600, allow_nan=False))
        out.append(
            Job(
                job_id=f"j{i}",
                submit_s=submit,
                kind=draw(st.sampled_from(list(JobKind))),
                gpus=draw(st.integers(1, 10)),
                duration_s=duration,
                estimate_s=draw(st.none() | st.floats(30, 3 * 3600, allow_nan=False)),
                priority=draw(st.floats(0.1, 10, allow_nan=False)),
                gpu_types=tuple(draw(st.lists(st.sampled_from(TYPES + ("tpu",)), max_size=2, unique=True))),
                deadline_s=draw(st.none() | st.floats(submit + 1, submit + 8 * 3600, allow_nan=False)),
                group=draw(st.none() | st.sampled_from(["g1", "g2"])),
            )
        )
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters, workload=jobs(), policy=st.sampled_from(POLICY_NAMES))
def test_random_workloads_simulate_within_capacity_and_lose_no_job(cluster, workload, policy):
    valid, errors = split_valid(workload, cluster)
    assert len(valid) + len(errors) == len(workload)
    horizon = 6 * 3600.0
    result = simulate(
        cluster,
        valid,
        make_policy(policy, config=PlannerConfig(time_limit_s=0.5)) if policy == "milp" else make_policy(policy),
        horizon,
    )
    assert set(result.outcomes) == {j.job_id for j in valid}
    assert schedule_violations(cluster, valid, result.outcomes, horizon) == []


@settings(max_examples=40, deadline=None)
@given(cluster=clusters, workload=jobs(n_max=20), now=st.floats(0, 3600, allow_nan=False))
def test_random_queues_plan_within_capacity(cluster, workload, now):
    valid, _ = split_valid(workload, cluster)
    queued = [j.with_estimate(j.estimate_s or j.duration_s or 60.0) for j in valid]
    plan = MilpPlanner(PlannerConfig(time_limit_s=0.5)).plan(cluster, queued, [], now)
    assert {s.job_id for s in plan.starts} | set(plan.unplanned) == {j.job_id for j in queued}
    assert plan.report.objective >= plan.report.greedy_objective - 1e-6
    by_id = {j.job_id: j for j in queued}
    for gpu_type in cluster.gpu_types:
        mine = [s for s in plan.starts if s.gpu_type == gpu_type.name]
        for s in mine:
            assert not by_id[s.job_id].gpu_types or s.gpu_type in by_id[s.job_id].gpu_types
            assert s.start_s >= now - 1e-6
            busy = sum(by_id[o.job_id].gpus for o in mine if o.start_s <= s.start_s < o.end_s)
            assert busy <= gpu_type.count


@given(value=st.one_of(st.none(), st.text(max_size=5), st.floats(), st.integers(-5, 0), st.booleans()))
def test_bad_values_raise_workload_error_not_crashes(value):
    try:
        Job("x", 0, "training", value, duration_s=10)  # type: ignore[arg-type]
    except WorkloadError as error:
        assert error.field == "gpus"
    else:
        assert isinstance(value, int) and value > 0


# --------------------------------------------------------------------------- random workload files (issue 5)

import io  # noqa: E402

from airflow_gpu_scheduler.core.workload_files import REQUIRED_COLUMNS, WorkloadFileError, read_jobs  # noqa: E402

JUNK = st.one_of(
    st.sampled_from(["", "0", "-1", "1.5", "nan", "inf", "1e9", "abc", "tpu", "x|", " 3 ", "h100|h100", "2.0"]),
    st.text(alphabet="0123456789.-e|ahx ", max_size=6),
)
GOOD = {
    "job_id": st.integers(0, 12).map(lambda i: f"j{i}"),
    "submit_s": st.integers(0, 3600).map(str),
    "kind": st.sampled_from([k.value for k in JobKind]),
    "gpus": st.integers(1, 10).map(str),
    "duration_s": st.integers(30, 3 * 3600).map(str),
    "estimate_s": st.sampled_from(["", "60", "600", "3600"]),
    "priority": st.sampled_from(["", "0.5", "1", "5"]),
    "gpu_types": st.sampled_from(["", "h100", "a100|l4", "tpu", "h100|a100"]),
    "deadline_s": st.sampled_from(["", "5000", "20000"]),
    "group": st.sampled_from(["", "g1"]),
    "max_wait_s": st.sampled_from(["", "0", "120"]),
    "junk": JUNK,
}
COLUMNS = list(GOOD)


@st.composite
def workload_files(draw):
    """Mostly well-formed jobs CSVs with random damage: dropped columns, junk cells, repeated ids."""
    header = [c for c in COLUMNS if c in REQUIRED_COLUMNS or draw(st.booleans())]
    if draw(st.integers(0, 9)) == 0:
        header.remove(draw(st.sampled_from(list(REQUIRED_COLUMNS))))
    header = draw(st.permutations(header))
    damage = draw(st.sampled_from([0.0, 0.0, 0.05, 0.3]))
    rows = [",".join(header)]
    for i in range(draw(st.integers(0, 10))):
        cells = [draw(JUNK) if draw(st.floats(0, 1)) < damage else draw(GOOD[c]) for c in header]
        if "job_id" in header and cells[header.index("job_id")].startswith("j"):
            cells[header.index("job_id")] = f"j{max(0, i - draw(st.sampled_from([0, 0, 0, 0, 1])))}"  # rare repeats
        rows.append(",".join(cells))
    return "\n".join(rows) + "\n"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters, text=workload_files(), policy=st.sampled_from(POLICY_NAMES))
def test_random_workload_files_are_rejected_clearly_or_simulated_within_capacity(cluster, text, policy):
    """Bad input tried: every malformed file gives a WorkloadFileError naming line and field, never a crash;
    every file that reads is validated, simulated within capacity, and every valid job is accounted for."""
    try:
        workload = read_jobs(io.StringIO(text))
    except WorkloadFileError as error:
        assert error.line is not None and error.reason
        event("rejected file")
        return
    event(f"read: {min(len(workload), 3)} jobs")
    valid, errors = split_valid(workload, cluster)
    assert len(valid) + len(errors) == len(workload) and all(e.job_id for e in errors)
    horizon = 4 * 3600.0
    result = simulate(
        cluster,
        valid,
        make_policy(policy, config=PlannerConfig(time_limit_s=0.3)) if policy == "milp" else make_policy(policy),
        horizon,
    )
    assert set(result.outcomes) == {j.job_id for j in valid}, "a job was lost"
    assert schedule_violations(cluster, valid, result.outcomes, horizon) == []
