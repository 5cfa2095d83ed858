"""A dispatch rule followed live: applied exactly as its baseline, scored exactly as it is applied."""

from dataclasses import replace

import pytest

from airflow_gpu_scheduler.core.estimates import EstimateErrors
from airflow_gpu_scheduler.core.levers import INTAKE_POOL, pool_name
from airflow_gpu_scheduler.core.planner.live import follow_rule, make_rule, rule_levers
from airflow_gpu_scheduler.core.planner.lookahead import SampledFuture
from airflow_gpu_scheduler.core.planner.plan import Plan, SolveReport
from airflow_gpu_scheduler.core.planner.rollout import RolloutConfig, RolloutPlanner
from airflow_gpu_scheduler.core.policies.backfill import EasyBackfillPolicy
from airflow_gpu_scheduler.core.policies.base import ClusterState, Decision
from airflow_gpu_scheduler.core.replan import ReplanRule
from airflow_gpu_scheduler.core.scenarios import make_scenario
from airflow_gpu_scheduler.core.simulate import simulate
from airflow_gpu_scheduler.core.workload import Cluster, Job, JobKind, RunningJob

FOUR = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 1.0}}})
TWO_TYPES = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 1.0}, "l4": {"count": 4, "speed": 0.5}}})
REPORT = SolveReport("test", "test", 0.0, 0.0, None, None, 0.0)


def job(job_id, gpus, estimate, priority=1.0, kind="batch_inference", submit=0.0, **kw):
    return Job(job_id, submit, kind, gpus, estimate_s=estimate, priority=priority, **kw)


class LiveBackfill:
    """The MILP policy's machinery (the re-planning rule and its levers) with a live backfill plan in force."""

    name = "live"
    cadence_s = None

    def __init__(self):
        self.rule = ReplanRule(release_next=True)

    def decide(self, state: ClusterState) -> Decision:
        if self.rule.plan is None:
            self.rule.solved(
                Plan(state.now_s, (), (), REPORT, {}, rule="backfill"), state.waiting, state.running, state.now_s
            )
        return Decision(self.rule.levers(state.cluster, state.waiting, state.running, state.now_s))


@pytest.mark.parametrize("scenario", ["steady_mix", "heterogeneous_fleet", "inference_diurnal"])
def test_a_live_rule_in_force_starts_every_job_where_and_when_its_baseline_does(scenario):
    sc = make_scenario(scenario, 100, quick=True)
    ours = simulate(sc.cluster, sc.jobs, LiveBackfill(), sc.horizon_s)
    baseline = simulate(sc.cluster, sc.jobs, EasyBackfillPolicy(), sc.horizon_s)
    started = [o for o in baseline.outcomes.values() if o.start_s is not None]
    assert len(started) > 20
    for job_id, o in baseline.outcomes.items():
        assert (ours.outcomes[job_id].gpu_type, ours.outcomes[job_id].start_s) == (o.gpu_type, o.start_s), job_id


def test_rule_levers_release_what_the_rule_starts_and_keep_endpoints_in_the_streaming_pool():
    running = [
        RunningJob(job("e0", 1, 3600.0, kind="realtime_inference", max_wait_s=60.0), "h100", -60.0),
        RunningJob(job("r", 1, 600.0), "h100", 0.0),
    ]
    waiting = [
        job("gang", 4, 3600.0, priority=5),
        job("short", 1, 300.0),
        job("e1", 1, 3600.0, kind="realtime_inference", priority=9, max_wait_s=60.0),
        job("long", 2, 9000.0),
    ]
    levers = rule_levers("backfill", FOUR, waiting, running, 0.0)
    baseline = EasyBackfillPolicy().decide(ClusterState(0.0, FOUR, tuple(waiting), tuple(running))).levers
    released = {j for j, a in levers.assignments.items() if a.pool != INTAKE_POOL}
    assert released == {j for j, a in baseline.assignments.items() if a.pool != INTAKE_POOL} == {"e1", "short"}
    assert levers.assignments["e1"].pool == pool_name("h100", streaming=True)
    assert levers.assignments["short"].pool == pool_name("h100")
    # The streaming pool holds the running endpoint and the one given GPUs; batch gets the rest.
    assert levers.pool_slots[pool_name("h100", streaming=True)] == 2
    assert levers.pool_slots[pool_name("h100")] == 2
    with pytest.raises(ValueError, match="unknown dispatch rule 'nope'"):
        make_rule("nope")


def test_following_the_rule_forward_is_the_simulator_running_its_baseline():
    # The same actual durations: the look-ahead's schedule is the simulator's, start for start.
    running = [RunningJob(job("r", 2, 600.0, kind="training"), "h100", -100.0)]
    waiting = [
        job(f"j{i}", 1 + i % 4, 500.0 + 130 * i, priority=1 + i % 3, gpu_types=("h100", "l4") if i % 2 else ("h100",))
        for i in range(14)
    ]
    ratio = {j.job_id: 0.6 + 0.1 * (i % 9) for i, j in enumerate(waiting)}
    future = SampledFuture({"r": 1500.0}, ratio)
    followed = {
        s.job.job_id: (s.gpu_type, s.start_s)
        for s in follow_rule("backfill", TWO_TYPES, waiting, running, 0.0, 1e6, future)
    }
    actual = [replace(j, duration_s=j.estimate_s * ratio[j.job_id]) for j in waiting]
    sim = simulate(
        TWO_TYPES,
        actual,
        EasyBackfillPolicy(),
        1e6,
        running_at_start=[replace(running[0], job=replace(running[0].job, duration_s=1600.0))],
    )
    assert followed == {j: (o.gpu_type, o.start_s) for j, o in sim.outcomes.items()}


def test_the_rollout_can_choose_the_live_rule_and_keeps_it_while_nothing_beats_it():
    # A reservation for endpoints that never come: backfill without one fills the GPUs sooner.
    running = [RunningJob(job("r", 2, 600.0, kind="training"), "h100", 0.0)]
    jobs = [job(f"b{i}", 1, 1800.0) for i in range(3)]
    exact = EstimateErrors([(kind, 1.0) for kind in JobKind for _ in range(10)])
    # No margin: the edge is small here, and hysteresis has its own test (test_rollout).
    config = RolloutConfig(candidates=("kept", "backfill", "greedy", "backfill_live"), switch_margin=0.0)
    planner = RolloutPlanner(rollout=config)
    plan = planner.plan(FOUR, jobs, running, 0.0, streaming_reserve={"h100": 2}, errors=exact)
    assert plan.report.chosen == "backfill_live" and plan.rule == "backfill", plan.report.candidates
    assert sorted(s.start_s for s in plan.starts) == [0.0, 0.0, 600.0]  # its projection, for review
    again = planner.plan(FOUR, jobs, running, 10.0, streaming_reserve={"h100": 2}, errors=exact, in_force=plan)
    assert again.report.chosen == "kept" and again.rule == "backfill"
