"""The rollout: candidate plans followed through Airflow's dispatch on sampled durations; the best is applied."""

from dataclasses import replace

import pytest

from airflow_gpu_scheduler.core.estimates import EstimateErrors
from airflow_gpu_scheduler.core.planner import PlannerConfig
from airflow_gpu_scheduler.core.planner.lookahead import (
    RecentDemand,
    SampledFuture,
    follow_plan,
    sample_futures,
    score,
)
from airflow_gpu_scheduler.core.planner.plan import Plan, PlannedStart, SolveReport
from airflow_gpu_scheduler.core.planner.projection import projected_plan
from airflow_gpu_scheduler.core.planner.rollout import RolloutConfig, RolloutPlanner
from airflow_gpu_scheduler.core.policies.backfill import EasyBackfillPolicy
from airflow_gpu_scheduler.core.policies.base import ClusterState, Completion
from airflow_gpu_scheduler.core.workload import Cluster, Job, JobKind, RunningJob

ONE = Cluster.from_dict({"gpu_types": {"h100": {"count": 1, "speed": 1.0}}})
FOUR = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 1.0}}})
EXACT = EstimateErrors([(kind, 1.0) for kind in JobKind for _ in range(10)])
REPORT = SolveReport("test", "test", 0.0, 0.0, None, None, 0.0)


def job(job_id, gpus, estimate, priority=1.0, kind="batch_inference", **kw):
    return Job(job_id, 0.0, kind, gpus, estimate_s=estimate, priority=priority, **kw)


def plan_of(*starts, reserve=None):
    """A hand-made plan: (job id, start) in rank order, all on h100."""
    return Plan(
        0.0,
        tuple(PlannedStart(j, "h100", t, t + 1, rank, False) for rank, (j, t) in enumerate(starts)),
        (),
        REPORT,
        reserve or {},
    )


def test_backfill_is_chosen_where_estimate_noise_breaks_the_milps_plan():
    # D can just meet its deadline if it starts now and runs as estimated, so the MILP starts it
    # first; EASY backfill runs the higher-priority X first. Completed jobs ran 1.5x their
    # estimates: D would miss its deadline anyway, and X's work would only come later.
    jobs = [job("D", 4, 3000.0, priority=2, deadline_s=3300.0), job("X", 4, 3000.0, priority=3)]
    late = EstimateErrors([(kind, 1.5) for kind in JobKind for _ in range(10)])
    planner = RolloutPlanner(PlannerConfig(mip_rel_gap=0.0))
    plan = planner.plan(FOUR, jobs, [], 0.0, errors=late)
    assert plan.report.chosen == "backfill"
    assert plan.report.candidates["backfill"] > plan.report.candidates["milp"]
    assert plan.by_job()["X"].start_s == 0.0
    # Where estimates have been right, the MILP's bet pays and its plan is applied.
    plan = planner.plan(FOUR, jobs, [], 0.0, errors=EXACT)
    assert plan.report.chosen == "milp" and plan.by_job()["D"].start_s == 0.0


def test_the_milp_plan_is_chosen_where_it_is_better():
    # Priority order (EASY backfill) starts A first and B misses its deadline; the MILP runs B
    # first, so both earn their value.
    jobs = [job("A", 4, 3600.0, priority=5), job("B", 4, 3600.0, priority=4, deadline_s=3700.0)]
    plan = RolloutPlanner(PlannerConfig(mip_rel_gap=0.0)).plan(FOUR, jobs, [], 0.0, errors=EXACT)
    assert plan.report.chosen == "milp"
    assert plan.report.candidates["milp"] > plan.report.candidates["backfill"]
    assert plan.by_job()["B"].start_s == 0.0


def test_a_gang_drain_that_noise_makes_futile_loses_to_filling_the_gpus():
    # Two of four GPUs run a training job expected to end at 600 s. Plan "drain" keeps the other
    # two idle for a 4-GPU gang; plan "fill" first runs two 1,000 s jobs there. If the estimate
    # holds, draining pays (the valuable gang starts 400 s sooner); if training runs 4x its
    # estimates, as completed training jobs did, the GPUs are not free before 2,400 s and the
    # drain only wasted them.
    running = [RunningJob(job("r", 2, 600.0, kind="training"), "h100", 0.0)]
    gang, small = job("gang", 4, 3600.0, priority=2), [job(f"s{i}", 1, 1000.0, kind="quantization") for i in range(2)]
    drain = plan_of(("gang", 600.0), ("s0", 4200.0), ("s1", 4200.0))
    fill = plan_of(("s0", 0.0), ("s1", 0.0), ("gang", 1000.0))
    planner = RolloutPlanner(rollout=RolloutConfig(lookahead_s=4 * 3600.0))
    slow = EstimateErrors([(kind, 4.0 if kind is JobKind.TRAINING else 1.0) for kind in JobKind for _ in range(10)])
    noisy = planner.evaluate({"milp": drain, "backfill": fill}, FOUR, [gang, *small], running, 0.0, slow)
    assert noisy["backfill"].goodput > noisy["milp"].goodput
    exact = planner.evaluate({"milp": drain, "backfill": fill}, FOUR, [gang, *small], running, 0.0, EXACT)
    assert exact["milp"].goodput > exact["backfill"].goodput


def test_a_job_that_ends_early_lets_the_next_in_plan_order_start_at_once():
    # Four 100 s jobs on one GPU. The MILP may only start queued jobs at grid points (300 s
    # apart), so its plan names 0, 300, 600, 900; followed in order, each starts the moment the
    # one before it ends, as the operator releases them.
    jobs = [job(f"q{i}", 1, 100.0) for i in range(4)]
    plan = RolloutPlanner(PlannerConfig(step_s=300.0), RolloutConfig(enabled=False)).plan(ONE, jobs, [], 0.0)
    assert sorted(s.start_s for s in plan.starts) == [0.0, 300.0, 600.0, 900.0]
    future = SampledFuture({}, {j.job_id: 1.0 for j in jobs})
    started = follow_plan(plan, ONE, jobs, [], 0.0, 1e5, future)
    assert sorted(s.start_s for s in started) == [0.0, 100.0, 200.0, 300.0]


def test_in_order_release_never_lets_a_smaller_job_pass_a_gang_the_plan_starts_first():
    running = [RunningJob(job("r", 2, 600.0), "h100", 0.0)]
    gang, small = job("gang", 4, 1000.0), job("small", 1, 100.0)
    plan = plan_of(("gang", 600.0), ("small", 1600.0))
    future = SampledFuture({"r": 900.0}, {"gang": 1.0, "small": 1.0})
    started = {s.job.job_id: s.start_s for s in follow_plan(plan, FOUR, [gang, small], running, 0.0, 1e5, future)}
    assert started == {"gang": 900.0, "small": 1900.0}  # two GPUs idle until 900 s: the drain


def test_following_a_plan_is_airflows_dispatch_a_gang_that_does_not_fit_is_passed():
    # Both jobs are due at once; the gang ranks first but two GPUs are busy, so Airflow skips it
    # and the 1-GPU job takes a free GPU (apache/airflow#29474), exactly as in the simulator.
    running = [RunningJob(job("r", 2, 600.0), "h100", 0.0)]
    gang, small = job("gang", 4, 1000.0), job("small", 1, 5000.0)
    plan = plan_of(("gang", 0.0), ("small", 0.0))
    future = SampledFuture({"r": 600.0}, {"gang": 1.0, "small": 1.0})
    started = {s.job.job_id: s.start_s for s in follow_plan(plan, FOUR, [gang, small], running, 0.0, 1e5, future)}
    assert started == {"small": 0.0, "gang": 5000.0}


def test_the_streaming_reservation_keeps_batch_work_out_of_its_gpus():
    jobs = [job(f"b{i}", 1, 600.0) for i in range(4)]
    plan = plan_of(*((j.job_id, 0.0) for j in jobs), reserve={"h100": 1})
    future = SampledFuture({}, {j.job_id: 1.0 for j in jobs})
    started = follow_plan(plan, FOUR, jobs, [], 0.0, 1e5, future)
    assert sorted(s.start_s for s in started) == [0.0, 0.0, 0.0, 600.0]


def test_goodput_is_pro_rata_and_zero_for_a_missed_deadline():
    jobs = [job("ok", 2, 1000.0, priority=3), job("late", 2, 1000.0, priority=3, deadline_s=500.0)]
    plan = plan_of(("ok", 0.0), ("late", 0.0))
    started = follow_plan(plan, FOUR, jobs, [], 0.0, 1e5, SampledFuture({}, {"ok": 1.0, "late": 1.0}))
    got = score(started, [500.0])
    assert got.goodput == 3 * 2 * 500.0  # half of "ok"'s work; nothing for "late"
    assert got.busy_gpu_s == 2 * 500.0 * 2


def test_running_jobs_are_sampled_past_what_they_already_ran():
    errors = EstimateErrors([(JobKind.TRAINING, r) for r in (0.5, 0.8, 1.0, 1.5, 2.0, 3.0, 1.2, 0.9)])
    r = RunningJob(job("r", 1, 1000.0, kind="training"), "h100", 0.0)
    for future in sample_futures(FOUR, [], [r], 1600.0, errors, samples=20):
        assert future.running_end["r"] >= 1600.0  # never ended in the past
        assert future.running_end["r"] in (2000.0, 3000.0)  # only ratios above 1.6 remain


def test_backfill_projection_starts_what_easy_backfill_starts_now():
    jobs = [job("gang", 4, 3600.0, priority=5), job("short", 1, 300.0), job("long", 1, 9000.0)]
    running = [RunningJob(job("r", 2, 600.0), "h100", 0.0)]
    plan = projected_plan(EasyBackfillPolicy(), FOUR, jobs, running, 0.0, 1e5, {}, "backfill")
    by = plan.by_job()
    assert by["short"].start_s == 0.0  # ends before the gang's reservation
    assert by["gang"].start_s == 600.0
    assert by["long"].start_s == 4200.0  # would delay the gang: after it


def test_rollout_is_deterministic_per_seed_with_a_node_limited_solver():
    jobs = [job(f"j{i}", 1 + i % 3, 600.0 + 97 * i, priority=1 + i % 4) for i in range(12)]
    running = [RunningJob(job("r", 2, 1200.0), "h100", -300.0)]
    cfg = PlannerConfig(time_limit_s=30.0, max_nodes=50)
    errors = EstimateErrors([(JobKind.BATCH_INFERENCE, 0.7 + 0.1 * i) for i in range(10)])
    plans = [RolloutPlanner(cfg, RolloutConfig(seed=7)).plan(FOUR, jobs, running, 0.0, errors=errors) for _ in range(2)]
    assert plans[0].starts == plans[1].starts
    assert plans[0].report.chosen == plans[1].report.chosen
    assert plans[0].report.candidates == plans[1].report.candidates


def test_rollout_off_applies_the_milp_plan():
    jobs = [job("D", 4, 3000.0, priority=2, deadline_s=3300.0), job("X", 4, 3000.0, priority=3)]
    late = EstimateErrors([(kind, 1.5) for kind in JobKind for _ in range(10)])
    plan = RolloutPlanner(PlannerConfig(mip_rel_gap=0.0), RolloutConfig(enabled=False)).plan(
        FOUR, jobs, [], 0.0, errors=late
    )
    assert plan.report.chosen == "" and plan.by_job()["D"].start_s == 0.0


def test_the_optional_candidates_compete_when_asked_for():
    # A reservation and no endpoint ever seen: the plan without it wins, and applies its own (empty)
    # reservation. (Candidates that act exactly like the MILP's plan are left out of the comparison.)
    # No margin: the edge here is small, and this is about which candidates compete, not hysteresis.
    running = [RunningJob(job("r", 2, 600.0, kind="training"), "h100", 0.0)]
    jobs = [job(f"b{i}", 1, 1800.0) for i in range(3)]
    everything = RolloutConfig(
        candidates=("kept", "backfill", "greedy", "backfill_cautious", "backfill_unreserved"), switch_margin=0.0
    )
    plan = RolloutPlanner(rollout=everything).plan(
        FOUR, jobs, running, 0.0, streaming_reserve={"h100": 2}, errors=EXACT
    )
    assert "backfill_unreserved" in plan.report.candidates, plan.report.candidates
    assert plan.report.chosen == "backfill_unreserved" and plan.streaming_reserve == {"h100": 0}
    assert sorted(s.start_s for s in plan.starts) == [0.0, 0.0, 600.0]


def test_the_plan_in_force_is_kept_unless_beaten_by_more_than_the_margin():
    # The plan in force runs B before A. The MILP runs the higher-priority A first: a tiny edge
    # when their priorities are close, a large one when they are far apart.
    in_force = plan_of(("B", 0.0), ("A", 3600.0))

    def chosen(priority_b, margin):
        jobs = [job("A", 4, 3600.0, priority=5), job("B", 4, 3600.0, priority=priority_b)]
        planner = RolloutPlanner(PlannerConfig(mip_rel_gap=0.0), RolloutConfig(switch_margin=margin))
        plan = planner.plan(FOUR, jobs, [], 0.0, errors=EXACT, in_force=in_force)
        scores = plan.report.candidates
        return plan.report.chosen, scores["milp"] / scores["kept"] - 1.0

    name, edge = chosen(4.9, 0.02)
    assert 0.0 < edge < 0.02 and name == "kept"
    assert chosen(4.9, 0.0)[0] == "milp"
    name, edge = chosen(1.0, 0.02)
    assert edge > 0.02 and name == "milp"


def test_the_plan_in_force_does_not_hold_newcomers_by_the_margin():
    # In force: B (2 GPUs) now, the gang A (4 GPUs) at 1 h. Since then C (1 GPU, 10 min) and D (2 GPUs,
    # 2 h) arrived, which it does not place. However large the margin, it does not stay by it while
    # another candidate places them: the plan applied places them all.
    in_force = plan_of(("B", 0.0), ("A", 3600.0))
    jobs = [job("A", 4, 3600.0, priority=5), job("B", 2, 3600.0, priority=4), job("C", 1, 600.0), job("D", 2, 7200.0)]
    planner = RolloutPlanner(PlannerConfig(step_s=60.0), RolloutConfig(switch_margin=1.0))
    plan = planner.plan(FOUR, jobs, [], 0.0, errors=EXACT, in_force=in_force)
    assert plan.report.chosen != "kept" and plan.unplanned == ()
    # With no newcomer, the same margin keeps the plan in force.
    settled = [j for j in jobs if j.job_id in ("A", "B")]
    plan = planner.plan(FOUR, settled, [], 0.0, errors=EXACT, in_force=in_force)
    assert plan.report.chosen == "kept" and [s.job_id for s in plan.starts] == ["B", "A"]


def test_a_bad_rollout_config_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="switch_margin"):
        RolloutConfig(switch_margin=-0.1)
    with pytest.raises(ValueError, match="unknown rollout candidate 'fifo'"):
        RolloutConfig(candidates=("kept", "fifo"))
    with pytest.raises(ValueError, match="'hold' candidate needs batch_arrivals"):
        RolloutConfig(candidates=("kept", "hold"))


@pytest.mark.parametrize(("penalty", "held"), [(None, 2), (1.0, 0)])
def test_the_plan_in_force_keeps_this_cycles_reservation_unless_it_is_soft(penalty, held):
    # In force: a plan made when no endpoint was expected (no reservation). Now two GPUs are
    # reserved. A hard reservation binds the kept plan like any other; only a soft one lets the
    # kept plan hold on to the GPUs it took from it.
    in_force = plan_of(("B", 0.0), ("A", 3600.0), reserve={"h100": 0})
    jobs = [job("A", 2, 3600.0, priority=5), job("B", 2, 3600.0, priority=4)]
    planner = RolloutPlanner(PlannerConfig(reserve_penalty=penalty))
    plans = planner.milp.plans(FOUR, jobs, [], 0.0, {"h100": 2})
    out = planner.candidates(FOUR, jobs, [], 0.0, plans.milp, plans.greedy, in_force, EXACT)
    assert out["kept"].streaming_reserve == {"h100": held}


def test_a_batch_job_that_arrives_goes_ahead_of_lower_priority_work_not_yet_released():
    # The plan runs L1 then L2 (priority 1, four GPUs each). A priority-5 gang arrives at 500 s: the
    # next solve ranks it before L2, so it starts when L1 ends and L2 waits for it.
    jobs = [job("L1", 4, 1000.0), job("L2", 4, 1000.0)]
    high = Job("H", 500.0, "training", 4, estimate_s=1000.0, priority=5.0)
    future = SampledFuture({}, {"L1": 1.0, "L2": 1.0}, (high,))
    started = follow_plan(plan_of(("L1", 0.0), ("L2", 1000.0)), FOUR, jobs, [], 0.0, 1e5, future)
    assert {s.job.job_id: s.start_s for s in started} == {"L1": 0.0, "H": 1000.0, "L2": 2000.0}
    # Work of no higher priority than what waits queues behind it.
    low = Job("H", 500.0, "training", 4, estimate_s=1000.0, priority=1.0)
    started = follow_plan(
        plan_of(("L1", 0.0), ("L2", 1000.0)), FOUR, jobs, [], 0.0, 1e5, replace(future, arrivals=(low,))
    )
    assert {s.job.job_id: s.start_s for s in started} == {"L1": 0.0, "L2": 1000.0, "H": 2000.0}


def test_futures_bring_batch_work_at_the_rate_it_was_submitted():
    seen = tuple(
        Job(f"b{i}", i * 600.0, "training", 2, estimate_s=3600.0, deadline_s=i * 600.0 + 7200.0) for i in range(6)
    )
    demand = RecentDemand((), 3600.0, seen)  # six an hour
    futures = sample_futures(FOUR, [], [], 3600.0, EXACT, 50, demand=demand, lookahead_s=3600.0, batch_arrivals=True)
    counts = [len(f.arrivals) for f in futures]
    assert 4.0 < sum(counts) / len(counts) < 8.0
    for f in futures:
        for a in f.arrivals:
            assert 3600.0 <= a.submit_s < 7200.0 and a.deadline_s == pytest.approx(a.submit_s + 7200.0)
    assert len({a.job_id for f in futures for a in f.arrivals}) == sum(counts)


def test_sampled_arrivals_are_the_jobs_seen_moved_in_time_as_a_validated_copy_would_be():
    # Arrivals are copied without re-validation (futures make tens of thousands per cycle):
    # each must equal what dataclasses.replace makes, field for field, and leave the original alone.
    seen = (Job("b0", 0.0, "training", 2, estimate_s=3600.0, priority=4.0, deadline_s=7200.0, group="g"),)
    endpoints = (Job("e0", 0.0, "realtime_inference", 1, estimate_s=600.0, priority=8.0),)
    demand = RecentDemand(endpoints, 3600.0, seen)
    futures = sample_futures(FOUR, [], [], 3600.0, EXACT, 20, demand=demand, lookahead_s=3600.0, batch_arrivals=True)
    arrivals = [a for f in futures for a in f.arrivals]
    assert {a.kind for a in arrivals} == {JobKind.TRAINING, JobKind.REALTIME_INFERENCE}
    for a in arrivals:
        original = seen[0] if a.kind is JobKind.TRAINING else endpoints[0]
        deadline = None if original.deadline_s is None else a.submit_s + 7200.0
        expected = replace(original, job_id=a.job_id, submit_s=a.submit_s, deadline_s=deadline)
        # ``is_streaming`` is cached on the instance and a copy may carry the original's: read it on both first.
        assert a.is_streaming == expected.is_streaming
        assert vars(a) == vars(expected) and a == expected and hash(a) == hash(expected)
    assert seen[0].job_id == "b0" and seen[0].submit_s == 0.0 and seen[0].deadline_s == 7200.0


def test_futures_leave_out_batch_work_no_more_important_than_all_that_waits():
    # Half of what was submitted is priority 1, half priority 5. With a priority-1 job waiting,
    # only the priority-5 half can overtake it, and it comes at its own rate (three an hour).
    seen = tuple(
        Job(f"b{i}", i * 600.0, "training", 2, estimate_s=3600.0, priority=1.0 + 4.0 * (i % 2)) for i in range(6)
    )
    demand = RecentDemand((), 3600.0, seen)
    waiting = [job("W", 2, 3600.0, priority=1.0)]
    futures = sample_futures(
        FOUR, waiting, [], 3600.0, EXACT, 60, demand=demand, lookahead_s=3600.0, batch_arrivals=True
    )
    arrivals = [a for f in futures for a in f.arrivals]
    assert {a.priority for a in arrivals} == {5.0}
    assert 1.5 < len(arrivals) / len(futures) < 4.5
    # With nothing waiting, all of it may matter.
    futures = sample_futures(FOUR, [], [], 3600.0, EXACT, 60, demand=demand, lookahead_s=3600.0, batch_arrivals=True)
    assert {a.priority for f in futures for a in f.arrivals} == {1.0, 5.0}


def test_long_low_priority_work_is_held_where_more_important_work_keeps_coming():
    # L (priority 1) would hold all four GPUs for ten hours. Over the last six hours a priority-9
    # gang of four GPUs was submitted every hour: started now, L would keep each of them waiting,
    # so the plan that holds L wins. With nothing important coming, L starts at once.
    jobs = [job("L", 4, 36000.0, kind="training")]
    seen = tuple(Job(f"h{i}", i * 3600.0, "training", 4, estimate_s=1800.0, priority=9.0) for i in range(6))
    planner = RolloutPlanner(
        rollout=RolloutConfig(candidates=("kept", "backfill", "greedy", "hold"), batch_arrivals=True)
    )
    plan = planner.plan(FOUR, jobs, [], 6 * 3600.0, errors=EXACT, demand=RecentDemand((), 6 * 3600.0, seen))
    assert plan.report.chosen == "hold" and plan.unplanned == ("L",)
    quiet = tuple(replace(j, priority=1.0) for j in seen)
    plan = planner.plan(FOUR, jobs, [], 6 * 3600.0, errors=EXACT, demand=RecentDemand((), 6 * 3600.0, quiet))
    assert plan.report.chosen != "hold" and plan.by_job()["L"].start_s == 6 * 3600.0


def test_recent_demand_counts_the_batch_work_submitted_in_its_memory():
    old, done, ran, waits = (job(n, 1, 600.0) for n in ("old", "done", "ran", "waits"))
    old, done = replace(old, submit_s=0.0), replace(done, submit_s=30000.0)
    ran, waits = replace(ran, submit_s=31000.0), replace(waits, submit_s=32000.0)
    state = ClusterState(
        40000.0,
        FOUR,
        (waits,),
        (RunningJob(ran, "h100", 31500.0),),
        completed=(Completion(old, "h100", 100.0, 700.0), Completion(done, "h100", 30100.0, 30700.0)),
    )
    demand = state.recent_demand(memory_s=6 * 3600.0)
    assert {j.job_id for j in demand.batch} == {"done", "ran", "waits"} and demand.seen == ()
