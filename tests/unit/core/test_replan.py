"""The one re-planning rule (solve, or keep applying the plan) and releasing the next job behind the pool gate."""

from airflow_gpu_scheduler.core.levers import INTAKE_POOL, WaitingTask, airflow_dispatch, levers_for_plan
from airflow_gpu_scheduler.core.planner import MilpPlanner, Plan, PlannedStart, PlannerConfig, SolveReport
from airflow_gpu_scheduler.core.replan import ReplanRule
from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob

NOW = 1_000.0
FOUR = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 1.0}}})
REPORT = SolveReport("milp", "optimal", 1.0, 1.0, 1.0, 0.0, 0.01)


def job(job_id, gpus=1, estimate=60.0, priority=1.0, kind="quantization", submit=NOW - 30):
    return Job(job_id, submit, kind, gpus, estimate_s=estimate, priority=priority, group=job_id)


def plan(*starts):
    """Plan order is the order given: (job_id, start)."""
    return Plan(
        NOW,
        tuple(PlannedStart(j, "h100", s, s + 60, rank, False) for rank, (j, s) in enumerate(starts)),
        (),
        REPORT,
        {},
    )


def running(*ids, start=NOW - 50):
    return [RunningJob(job(i), "h100", start) for i in ids]


def started_now(levers, waiting, busy):
    tasks = [
        WaitingTask(
            j.job_id,
            levers.assignments[j.job_id].pool,
            j.gpus,
            levers.assignments[j.job_id].weight,
            j.submit_s,
            j.job_id,
        )
        for j in waiting
    ]
    return airflow_dispatch(tasks, levers.pool_slots, {"gpu_h100": busy})


def test_the_head_of_the_order_waits_in_its_pool_and_nothing_smaller_overtakes_it():
    gang, small = job("gang", 4, priority=10, kind="training"), job("small")
    waiting = [gang, small]
    levers = levers_for_plan(
        plan(("gang", NOW + 10), ("small", NOW + 70)), FOUR, waiting, running("a", "b", "c"), NOW, release_next=True
    )
    assert levers.assignments["gang"].pool == "gpu_h100"  # released ahead: Airflow starts it once 4 GPUs are free
    assert levers.assignments["small"].pool == INTAKE_POOL  # behind the gang: held, it cannot take a freed GPU
    assert started_now(levers, waiting, busy=3) == []
    assert started_now(levers, waiting, busy=0) == ["gang"]


def test_a_gpu_that_frees_early_is_refilled_by_the_next_job_in_plan_order():
    first, second, third = job("first"), job("second"), job("third")
    waiting = [first, second, third]
    p = plan(("first", NOW + 10), ("second", NOW + 20), ("third", NOW + 30))
    # Two of four GPUs busy: the first two fit now, the third waits in the pool for the next GPU.
    levers = levers_for_plan(p, FOUR, waiting, running("a", "b"), NOW, release_next=True)
    assert [levers.assignments[j.job_id].pool for j in waiting] == ["gpu_h100"] * 3
    assert started_now(levers, waiting, busy=2) == ["first", "second"]
    # Without release_next they wait for their planned starts (the next plan), GPUs idle meanwhile.
    plain = levers_for_plan(p, FOUR, waiting, running("a", "b"), NOW)
    assert all(a.pool == INTAKE_POOL for a in plain.assignments.values())


def test_nothing_is_released_ahead_while_a_due_job_still_waits_for_gpus():
    due, later = job("due", 2), job("later")
    waiting = [due, later]
    levers = levers_for_plan(
        plan(("due", NOW - 5), ("later", NOW + 30)), FOUR, waiting, running("a", "b", "c"), NOW, release_next=True
    )
    assert levers.assignments["due"].pool == "gpu_h100" and levers.assignments["later"].pool == INTAKE_POOL


def test_the_rule_solves_first_then_keeps_applying_until_a_surprise_or_the_interval():
    rule = ReplanRule(early_s=5.0, min_interval_s=100.0)
    busy = running("a", "b", "c", "d")
    q1 = [job("q1")]
    assert rule.decide(FOUR, q1, busy, NOW).reason == "first"
    rule.solved(plan(("q1", NOW + 10)), q1, busy, NOW)
    assert not rule.decide(FOUR, q1, busy, NOW + 1).solve  # nothing changed
    # New work while every GPU is busy: the plan keeps applying (nothing could start anyway);
    # q1 stays released ahead, next in line, unless the newcomer outranks it.
    q2 = [*q1, job("q2")]
    assert not rule.decide(FOUR, q2, busy, NOW + 2).solve
    assert rule.levers(FOUR, q2, busy, NOW + 2).assignments["q1"].pool == INTAKE_POOL  # release_next is off
    ahead = ReplanRule(early_s=5.0, min_interval_s=100.0, release_next=True)
    ahead.decide(FOUR, q1, busy, NOW)
    ahead.solved(plan(("q1", NOW + 10)), q1, busy, NOW)
    assert ahead.levers(FOUR, q2, busy, NOW + 2).assignments["q1"].pool == "gpu_h100"
    gang = [*q1, job("gang", 4, priority=9, kind="training")]
    assert ahead.levers(FOUR, gang, busy, NOW + 2).assignments["q1"].pool == INTAKE_POOL
    # A job ends well before its estimate and a held job fits: surprise.
    assert rule.decide(FOUR, q2, busy[1:], NOW + 3).reason == "surprise"
    rule.solved(plan(("q1", NOW + 3), ("q2", NOW + 20)), q2, busy[1:], NOW + 3)
    assert rule.wake_at_s(q2, busy[1:], NOW + 4) == NOW + 20
    # A change without a surprise waits for the interval.
    assert not rule.decide(FOUR, q2[1:], busy[1:], NOW + 5).solve
    assert rule.wake_at_s(q2[1:], busy[1:], NOW + 5) == NOW + 20  # q2's start comes before the retry
    assert rule.wake_at_s([], busy[1:], NOW + 5) == NOW + 3 + 100.0
    assert rule.decide(FOUR, q2[1:], busy[1:], NOW + 103).reason == "interval"


def test_an_unplaced_streaming_job_is_solved_for_at_once():
    rule = ReplanRule(min_interval_s=1e9)
    busy = running("a", "b", "c", "d")
    rule.decide(FOUR, [], busy, NOW)
    rule.solved(MilpPlanner(PlannerConfig(step_s=1.0)).plan(FOUR, [job("x")], busy, NOW), [], busy, NOW)
    endpoint = job("rt", kind="realtime_inference")
    assert rule.decide(FOUR, [endpoint], busy, NOW + 1).reason == "streaming"
