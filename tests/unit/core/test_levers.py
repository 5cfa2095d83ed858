"""Airflow's dispatch rule as the simulator models it (observed on Airflow 3.3.2)."""

from airflow_gpu_scheduler.core.levers import INTAKE_POOL, WaitingTask, airflow_dispatch, gpu_type_of_pool, pool_name


def task(job_id, pool="gpu_h100", slots=1, weight=1, arrival=0.0, key=None):
    return WaitingTask(job_id, pool, slots, weight, arrival, key or job_id)


def test_order_is_weight_then_arrival():
    waiting = [
        task("late", weight=5, arrival=10),
        task("early", weight=5, arrival=1),
        task("top", weight=9, arrival=99),
    ]
    assert airflow_dispatch(waiting, {"gpu_h100": 2}, {}) == ["top", "early"]


def test_a_gang_that_does_not_fit_is_skipped_and_smaller_later_jobs_start():
    # The measured behaviour behind apache/airflow#29474: no reservation for the big task.
    waiting = [task("a", weight=10), task("big", slots=2, weight=9), task("c", weight=8), task("d", weight=7)]
    assert airflow_dispatch(waiting, {"gpu_h100": 2}, {}) == ["a", "c"]


def test_starved_task_skips_its_other_instances_in_the_same_loop():
    waiting = [
        task("x1", slots=3, weight=9, key="dag.t"),
        task("x2", slots=1, weight=8, key="dag.t"),
        task("y", slots=1, weight=1, key="dag.u"),
    ]
    assert airflow_dispatch(waiting, {"gpu_h100": 2}, {}) == ["y"]


def test_intake_pool_and_unknown_pools_never_start():
    waiting = [task("held", pool=INTAKE_POOL, weight=100), task("lost", pool="nope", weight=50), task("ok")]
    assert airflow_dispatch(waiting, {INTAKE_POOL: 0, "gpu_h100": 4}, {}) == ["ok"]


def test_used_slots_count_against_the_pool():
    assert airflow_dispatch([task("a", slots=2)], {"gpu_h100": 4}, {"gpu_h100": 3}) == []


def test_pool_names_round_trip():
    assert gpu_type_of_pool(pool_name("h100")) == "h100"
    assert gpu_type_of_pool(pool_name("h100", streaming=True)) == "h100"
    assert gpu_type_of_pool(INTAKE_POOL) is None
    assert gpu_type_of_pool("default_pool") is None


def test_levers_hold_jobs_not_yet_due_and_release_ahead_by_choice():
    from airflow_gpu_scheduler.core.levers import levers_for_plan
    from airflow_gpu_scheduler.core.planner import MilpPlanner
    from airflow_gpu_scheduler.core.workload import Cluster, Job

    cluster = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 1.0}}})
    jobs = [
        Job("now", 0, "training", 4, estimate_s=600, priority=9),
        Job("next", 0, "quantization", 4, estimate_s=600, priority=1),
    ]
    plan = MilpPlanner().plan(cluster, jobs, [], 0.0)
    held = levers_for_plan(plan, cluster, jobs, [], 0.0, release_next=False)
    assert held.assignments["now"].pool == "gpu_h100" and held.assignments["next"].pool == INTAKE_POOL
    assert held.pool_slots == {INTAKE_POOL: 0, "gpu_h100": 4, "gpu_h100_streaming": 0}
    early = levers_for_plan(plan, cluster, jobs, [], 0.0, release_ahead_s=600)
    assert early.assignments["next"].pool == "gpu_h100"
    assert early.assignments["now"].weight > early.assignments["next"].weight


def test_released_jobs_go_to_their_gpu_types_queue_and_held_jobs_keep_theirs():
    from airflow_gpu_scheduler.core.levers import executor_queue, levers_for_plan
    from airflow_gpu_scheduler.core.planner import MilpPlanner
    from airflow_gpu_scheduler.core.workload import Cluster, Job

    cluster = Cluster.from_dict(
        {"gpu_types": {"h100": {"count": 2, "speed": 1.0, "queue": "h100-nodes"}, "a100": {"count": 2, "speed": 1.0}}}
    )
    assert [executor_queue(t) for t in cluster.gpu_types] == ["h100-nodes", "gpu-a100"]
    jobs = [
        Job("on_h100", 0, "training", 2, gpu_types=("h100",), estimate_s=600, priority=5),
        Job("on_a100", 0, "training", 2, gpu_types=("a100",), estimate_s=600, priority=5),
        Job("later", 0, "training", 2, gpu_types=("a100",), estimate_s=600, priority=1),
    ]
    levers = levers_for_plan(MilpPlanner().plan(cluster, jobs, [], 0.0), cluster, jobs, [], 0.0)
    assert (levers.assignments["on_h100"].pool, levers.assignments["on_h100"].queue) == ("gpu_h100", "h100-nodes")
    assert (levers.assignments["on_a100"].pool, levers.assignments["on_a100"].queue) == ("gpu_a100", "gpu-a100")
    assert levers.assignments["later"].pool == INTAKE_POOL and levers.assignments["later"].queue is None


def test_next_jobs_in_plan_order_are_released_when_gpus_free_but_never_past_a_gang():
    from airflow_gpu_scheduler.core.levers import levers_for_plan
    from airflow_gpu_scheduler.core.planner import Plan, PlannedStart, SolveReport
    from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob

    cluster = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 1.0}}})
    report = SolveReport("test", "test", 0.0, 0.0, None, None, 0.0)
    a, gang, b = (
        Job("a", 0, "quantization", 1, estimate_s=600),
        Job("gang", 0, "training", 4, estimate_s=600),
        Job("b", 0, "quantization", 1, estimate_s=600),
    )
    running = [RunningJob(Job("r", 0, "training", 2, estimate_s=900), "h100", 0.0)]
    plan = Plan(
        0.0,
        (
            PlannedStart("a", "h100", 900.0, 1500.0, 0, False),
            PlannedStart("gang", "h100", 1500.0, 2100.0, 1, False),
            PlannedStart("b", "h100", 2100.0, 2700.0, 2, False),
        ),
        (),
        report,
        {},
    )
    # Two GPUs are free at 300 s: "a" (next in order, 1 GPU) goes now; the gang does not fit, so
    # it waits in its pool for the GPUs (the pool's slots are the gate), and "b" behind it stays
    # held although a GPU would be free for it.
    levers = levers_for_plan(plan, cluster, [a, gang, b], running, 300.0, release_next=True)
    assert [levers.assignments[j].pool for j in ("a", "gang", "b")] == ["gpu_h100", "gpu_h100", INTAKE_POOL]
    assert levers.assignments["a"].weight > levers.assignments["gang"].weight
    # Without in-order release only what is due by the clock goes.
    levers = levers_for_plan(plan, cluster, [a, gang, b], running, 300.0, release_next=False)
    assert levers.assignments["a"].pool == INTAKE_POOL
    # The streaming reservation is not batch work's to take: "a" waits in its pool, whose slots
    # leave the two reserved GPUs out, and the gang behind it stays held.
    reserved = Plan(0.0, plan.starts, (), report, {"h100": 2})
    levers = levers_for_plan(reserved, cluster, [a, gang, b], running, 300.0, release_next=True)
    assert [levers.assignments[j].pool for j in ("a", "gang", "b")] == ["gpu_h100", INTAKE_POOL, INTAKE_POOL]
    assert levers.pool_slots["gpu_h100"] == 2  # both already held by the running job


def test_an_endpoint_that_arrived_after_the_plan_goes_first_without_waiting_for_a_solve():
    from airflow_gpu_scheduler.core.levers import levers_for_plan, plan_weight
    from airflow_gpu_scheduler.core.planner import Plan, PlannedStart, SolveReport
    from airflow_gpu_scheduler.core.workload import Cluster, Job

    cluster = Cluster.from_dict({"gpu_types": {"h100": {"count": 2, "speed": 1.0}, "l4": {"count": 4, "speed": 0.5}}})
    report = SolveReport("test", "test", 0.0, 0.0, None, None, 0.0)
    batch = Job("batch", 0, "quantization", 1, estimate_s=600)
    endpoint = Job("endpoint", 10, "realtime_inference", 1, estimate_s=600)
    plan = Plan(0.0, (PlannedStart("batch", "h100", 600.0, 1200.0, 0, False),), (), report, {})
    levers = levers_for_plan(plan, cluster, [batch, endpoint], [], 20.0)
    assert levers.assignments["endpoint"].pool == "gpu_l4_streaming"  # the type with the most GPUs free
    assert levers.assignments["endpoint"].weight == plan_weight(-1) > plan_weight(0)
    assert levers.pool_slots["gpu_l4_streaming"] == 1


def test_a_waiting_endpoint_gets_the_next_gpu_that_frees_not_the_batch_pool():
    # Every GPU runs batch work and an endpoint waits: the batch pool is closed below what runs in
    # it, so when a batch job ends Airflow cannot start the next batch job there before the planner
    # looks again and gives the endpoint the GPU.
    from airflow_gpu_scheduler.core.levers import airflow_dispatch, levers_for_plan
    from airflow_gpu_scheduler.core.planner import Plan, PlannedStart, SolveReport
    from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob

    cluster = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 1.0}}})
    report = SolveReport("test", "test", 0.0, 0.0, None, None, 0.0)
    running = [RunningJob(Job(f"r{i}", 0, "quantization", 1, estimate_s=600), "h100", 0.0) for i in range(4)]
    nxt = Job("next", 0, "quantization", 1, estimate_s=600)
    endpoint = Job("endpoint", 10, "realtime_inference", 1, estimate_s=600)
    plan = Plan(0.0, (PlannedStart("next", "h100", 0.0, 600.0, 0, False),), (), report, {})
    levers = levers_for_plan(plan, cluster, [nxt, endpoint], running, 20.0, release_next=True)
    assert levers.assignments["endpoint"].pool == "gpu_h100_streaming"
    assert levers.pool_slots == {INTAKE_POOL: 0, "gpu_h100_streaming": 0, "gpu_h100": 3}
    # r0 ends; before the levers are applied again, nothing in the batch pool may start.
    from airflow_gpu_scheduler.core.levers import WaitingTask

    tasks = [WaitingTask("next", "gpu_h100", 1, levers.assignments["next"].weight, 0.0, "next")]
    assert airflow_dispatch(tasks, levers.pool_slots, {"gpu_h100": 3, "gpu_h100_streaming": 0}) == []


def _drain_setup():
    """Four GPUs: two run 1-GPU jobs until 600 s and 900 s, a 4-GPU gang is planned at 900 s."""
    from airflow_gpu_scheduler.core.planner import Plan, PlannedStart, SolveReport
    from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob

    cluster = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 1.0}}})
    report = SolveReport("test", "test", 0.0, 0.0, None, None, 0.0)
    running = [
        RunningJob(Job("r1", 0, "quantization", 1, estimate_s=600), "h100", 0.0),
        RunningJob(Job("r2", 0, "quantization", 1, estimate_s=900), "h100", 0.0),
    ]
    gang = Job("gang", 0, "training", 4, estimate_s=7200, priority=9)
    plan = Plan(0.0, (PlannedStart("gang", "h100", 900.0, 8100.0, 0, False),), (), report, {})
    return cluster, running, gang, plan


def test_an_endpoint_the_plan_has_not_placed_does_not_break_a_drain_for_a_more_valuable_gang():
    # A stream of endpoints, each taking a GPU the drain waits for, would postpone the gang for
    # ever: an endpoint that would still run at the gang's planned start waits for the next solve.
    from dataclasses import replace

    from airflow_gpu_scheduler.core.levers import levers_for_plan
    from airflow_gpu_scheduler.core.workload import Job

    cluster, running, gang, plan = _drain_setup()
    long_endpoint = Job("endpoint", 10, "realtime_inference", 1, estimate_s=3600, priority=8)
    levers = levers_for_plan(plan, cluster, [gang, long_endpoint], running, 20.0, release_next=True)
    assert levers.assignments["endpoint"].pool == INTAKE_POOL
    # One that ends before the gang's start delays nothing, and goes at once.
    short = replace(long_endpoint, estimate_s=300)
    levers = levers_for_plan(plan, cluster, [gang, short], running, 20.0, release_next=True)
    assert levers.assignments["endpoint"].pool == "gpu_h100_streaming"
    # The streaming reservation is the endpoint's whatever the plan drains for.
    reserved = replace(plan, streaming_reserve={"h100": 1})
    levers = levers_for_plan(reserved, cluster, [gang, long_endpoint], running, 20.0, release_next=True)
    assert levers.assignments["endpoint"].pool == "gpu_h100_streaming"
    # A drain for a job that earns less per second than the endpoint does not hold it back.
    cheap = replace(gang, priority=1, gpus=4)
    levers = levers_for_plan(plan, cluster, [cheap, replace(long_endpoint, priority=8, gpus=1)], running, 20.0)
    assert cheap.priority * cheap.gpus < 8 * 1
    assert levers.assignments["endpoint"].pool == "gpu_h100_streaming"


def test_the_look_ahead_holds_an_arriving_endpoint_back_from_a_drain_as_the_levers_do():
    from airflow_gpu_scheduler.core.planner.lookahead import SampledFuture, follow_plan
    from airflow_gpu_scheduler.core.workload import Job

    cluster, running, gang, plan = _drain_setup()
    endpoint = Job("~arrival:0:0", 100, "realtime_inference", 1, estimate_s=3600, priority=8)
    future = SampledFuture({"r1": 600.0, "r2": 900.0}, {"gang": 1.0}, (endpoint,))
    started = {s.job.job_id: s.start_s for s in follow_plan(plan, cluster, [gang], running, 0.0, 1e5, future)}
    # The gang starts when the drain ends; the endpoint after it, when the gang gives the GPUs back.
    assert started == {"gang": 900.0, "~arrival:0:0": 8100.0}


def test_endpoints_that_arrived_since_the_plan_get_distinct_weights_oldest_first():
    # Airflow orders equal weights by the run's logical date (NULL for manual runs), not by arrival,
    # so the arrival order the simulator breaks ties by is written into the weights.
    from airflow_gpu_scheduler.core.levers import levers_for_plan, plan_weight
    from airflow_gpu_scheduler.core.planner import Plan, PlannedStart, SolveReport
    from airflow_gpu_scheduler.core.workload import Cluster, Job

    cluster = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 1.0}}})
    report = SolveReport("test", "test", 0.0, 0.0, None, None, 0.0)
    planned = Job("planned", 0, "realtime_inference", 1, estimate_s=600)
    late = Job("a-late", 30, "realtime_inference", 1, estimate_s=600)
    early = Job("z-early", 10, "realtime_inference", 1, estimate_s=600)
    plan = Plan(0.0, (PlannedStart("planned", "h100", 0.0, 600.0, 0, True),), (), report, {"h100": 3})
    levers = levers_for_plan(plan, cluster, [planned, late, early], [], 40.0)
    weights = {job_id: a.weight for job_id, a in levers.assignments.items()}
    assert weights["z-early"] > weights["a-late"] > weights["planned"] == plan_weight(0)
    tasks = [WaitingTask(j, "gpu_h100_streaming", 1, w, 0.0, j) for j, w in weights.items()]
    assert airflow_dispatch(tasks, {"gpu_h100_streaming": 3}, {}) == ["z-early", "a-late", "planned"]
