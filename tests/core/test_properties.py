"""Property-based tests: random workloads never crash the core, and every plan and
schedule respects capacity and accounts for every job."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_gpu_scheduler.core.planner import MilpPlanner, PlannerConfig
from airflow_gpu_scheduler.core.policies import POLICY_NAMES, make_policy
from airflow_gpu_scheduler.core.simulate import simulate
from airflow_gpu_scheduler.core.verify import schedule_violations
from airflow_gpu_scheduler.core.workload import Cluster, GpuType, Job, JobKind, WorkloadError, split_valid

TYPES = ("h100", "a100", "l4")
clusters = st.lists(
    st.tuples(st.sampled_from(TYPES), st.integers(1, 8), st.sampled_from([0.4, 1.0, 2.0])),
    min_size=1, max_size=3, unique_by=lambda t: t[0],
).map(lambda ts: Cluster(tuple(GpuType(n, c, s) for n, c, s in ts)))


@st.composite
def jobs(draw, n_max=12):
    out = []
    for i in range(draw(st.integers(0, n_max))):
        submit = draw(st.floats(0, 4 * 3600, allow_nan=False))
        duration = draw(st.floats(30, 3 * 3600, allow_nan=False))
        out.append(Job(
            job_id=f"j{i}", submit_s=submit, kind=draw(st.sampled_from(list(JobKind))),
            gpus=draw(st.integers(1, 10)), duration_s=duration,
            estimate_s=draw(st.none() | st.floats(30, 3 * 3600, allow_nan=False)),
            priority=draw(st.floats(0.1, 10, allow_nan=False)),
            gpu_types=tuple(draw(st.lists(st.sampled_from(TYPES + ("tpu",)), max_size=2, unique=True))),
            deadline_s=draw(st.none() | st.floats(submit + 1, submit + 8 * 3600, allow_nan=False)),
            group=draw(st.none() | st.sampled_from(["g1", "g2"])),
        ))
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters, workload=jobs(), policy=st.sampled_from(POLICY_NAMES))
def test_random_workloads_simulate_within_capacity_and_lose_no_job(cluster, workload, policy):
    valid, errors = split_valid(workload, cluster)
    assert len(valid) + len(errors) == len(workload)
    horizon = 6 * 3600.0
    result = simulate(cluster, valid, make_policy(policy, config=PlannerConfig(time_limit_s=0.5))
                      if policy == "milp" else make_policy(policy), horizon)
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
