"""Property-based: random GPU declarations, as a team might write them, through the validator, the
planner, the levers and the simulator. No crash; every task instance is planned or rejected with a
field and a reason, never both, never neither; plans and pools respect capacity; no job is lost."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_gpu_scheduler.core.levers import INTAKE_POOL, levers_for_plan, pool_name
from airflow_gpu_scheduler.core.planner import MilpPlanner, PlannerConfig
from airflow_gpu_scheduler.core.policies import make_policy
from airflow_gpu_scheduler.core.simulate import simulate
from airflow_gpu_scheduler.core.verify import schedule_violations
from airflow_gpu_scheduler.core.workload import Cluster, GpuType, JobKind
from airflow_gpu_scheduler.gpu_work import build_workload
from airflow_gpu_scheduler.hooks.metadata import GpuTaskInstance, GpuWorkSnapshot, TaskInstanceKey

NOW = 1_800_000_000.0
TYPES = ("h100", "a100", "l4")

clusters = st.lists(
    st.tuples(st.sampled_from(TYPES), st.integers(1, 8), st.sampled_from([0.5, 1.0, 2.0])),
    min_size=1,
    max_size=3,
    unique_by=lambda t: t[0],
).map(lambda ts: Cluster(tuple(GpuType(n, c, s) for n, c, s in ts)))
seconds = st.one_of(
    st.none(),
    st.integers(-60, 20_000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["20m", "3600", True, [60]]),
)
FIELDS = {
    "kind": st.one_of(
        st.sampled_from([k.value for k in JobKind]), st.sampled_from(["", "Training", "trainin", 3, None, ["training"]])
    ),
    "gpus": st.one_of(st.integers(-2, 12), st.sampled_from(["2", 1.5, True, None, [1]])),
    "gpu_types": st.one_of(
        st.lists(st.sampled_from([*TYPES, "h200", ""]), max_size=3),
        st.sampled_from(["h100", 5, None, {"h100": 1}, [["h100"]]]),
    ),
    "estimate_s": seconds,
    "priority": st.one_of(st.floats(allow_nan=True), st.integers(-1, 10), st.sampled_from(["high", None])),
    "deadline_s": seconds,
    "max_wait_s": seconds,
    "version": st.just(1),
    "gpu": st.integers(),  # a typo of "gpus"
}
# Mostly plausible declarations (so plenty reach the planner), some garbage, some not even objects.
plausible = st.fixed_dictionaries(
    {
        "kind": st.sampled_from([k.value for k in JobKind]),
        "gpus": st.integers(1, 4),
        "estimate_s": st.integers(30, 7200),
    },
    optional={
        "gpu_types": st.lists(st.sampled_from(TYPES), max_size=2, unique=True),
        "priority": st.integers(1, 9),
        "deadline_s": st.integers(600, 20_000),
    },
)
declarations = st.one_of(
    plausible,
    plausible,
    st.fixed_dictionaries({}, optional=FIELDS),
    st.none(),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
)


def _slots(declaration) -> int:
    gpus = declaration.get("gpus") if isinstance(declaration, dict) else None
    return gpus if type(gpus) is int and gpus > 0 else 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cluster=clusters, decls=st.lists(declarations, max_size=12), slot_noise=st.lists(st.booleans(), max_size=12))
def test_random_declarations_never_crash_and_every_task_instance_is_accounted_for(cluster, decls, slot_noise):
    tis = []
    for i, decl in enumerate(decls):
        slots = _slots(decl) + (1 if i < len(slot_noise) and slot_noise[i] and i % 5 == 0 else 0)
        tis.append(
            GpuTaskInstance(
                TaskInstanceKey("d", f"r{i}", "t", -1),
                "scheduled",
                INTAKE_POOL,
                slots,
                1,
                NOW - 10 * i,
                None,
                None,
                None,
                decl,
            )
        )
    work = build_workload(GpuWorkSnapshot(NOW, tuple(tis), (), ()), cluster)

    ids = {t.key.job_id for t in tis}
    planned = {j.job_id for j in work.queued}
    assert planned | set(work.rejected) == ids and not planned & set(work.rejected), "a job was lost or doubled"
    assert set(work.rejection_fields) == set(work.rejected)
    for detail in work.rejection_fields.values():
        assert detail["task"] == "d.t" and detail["field"] and detail["reason"]

    plan = MilpPlanner(PlannerConfig(step_s=60.0, time_limit_s=0.3)).plan(cluster, work.queued, [], NOW, work.reserve)
    assert {s.job_id for s in plan.starts} | set(plan.unplanned) == planned
    by_id = {j.job_id: j for j in work.queued}
    for gpu_type in cluster.gpu_types:
        mine = [s for s in plan.starts if s.gpu_type == gpu_type.name]
        for s in mine:
            assert s.start_s >= NOW - 1e-6
            assert sum(by_id[o.job_id].gpus for o in mine if o.start_s <= s.start_s < o.end_s) <= gpu_type.count
    levers = levers_for_plan(plan, cluster, work.queued, [], NOW)
    for gpu_type in cluster.gpu_types:
        assert (
            levers.pool_slots[pool_name(gpu_type.name)] + levers.pool_slots[pool_name(gpu_type.name, True)]
            <= gpu_type.count
        )
    assert not set(levers.assignments) & set(work.rejected), "a rejected task must never be released"

    # The simulator runs the same valid jobs (true duration = estimate) within capacity, losing none.
    jobs = [replace(j, submit_s=j.submit_s - NOW + 100, deadline_s=None, duration_s=j.estimate_s) for j in work.queued]
    result = simulate(cluster, jobs, make_policy("airflow"), 6 * 3600.0)
    assert set(result.outcomes) == {j.job_id for j in jobs}
    assert schedule_violations(cluster, jobs, result.outcomes, 6 * 3600.0) == []
