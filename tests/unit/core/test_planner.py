"""The MILP on hand-made instances whose optimal plan is known."""

from airflow_gpu_scheduler.core.planner import MilpPlanner, PlannerConfig, start_grid
from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob

FOUR = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 1.0}}})


def est(job_id, gpus, estimate, priority, kind="batch_inference", **kw):
    return Job(job_id, 0.0, kind, gpus, estimate_s=estimate, priority=priority, **kw)


def test_milp_finds_the_known_optimum_where_greedy_does_not():
    # Greedy (priority order) starts A (3 GPUs) first; B and C then wait an hour.
    # Starting B and C (2+2 GPUs) first and A after them is worth more (work discounted at its
    # midpoint, half an hour for the first hour's jobs and 1.5 h for the second's):
    #   greedy: 54000*(1-.5*.5/24) + 2*28800*(1-.5*1.5/24) = 109237.5
    #   best:   2*28800*(1-.5*.5/24) + 54000*(1-.5*1.5/24) = 109312.5
    jobs = [est("A", 3, 3600, 5), est("B", 2, 3600, 4), est("C", 2, 3600, 4)]
    plan = MilpPlanner(PlannerConfig(mip_rel_gap=0.0)).plan(FOUR, jobs, [], 0.0)
    starts = {s.job_id: (s.gpu_type, s.start_s) for s in plan.starts}
    assert starts == {"B": ("h100", 0.0), "C": ("h100", 0.0), "A": ("h100", 3600.0)}
    assert plan.report.method == "milp" and plan.report.status == "optimal"
    assert plan.report.objective > plan.report.greedy_objective
    assert abs(plan.report.objective - 109312.5) < 1.0  # tie-break terms on starts are ~1e-4 relative
    assert plan.report.gap is not None and plan.report.gap < 1e-6


def test_running_jobs_occupy_capacity_until_their_expected_end():
    running = [RunningJob(est("r", 2, 1800, 1), "h100", start_s=-600.0)]  # expected end: 1200
    plan = MilpPlanner().plan(FOUR, [est("gang", 4, 600, 9, kind="training")], running, 0.0)
    assert plan.starts[0].start_s == 1200.0  # the running job's end is a grid point


def test_type_compatibility_and_speed():
    cluster = Cluster.from_dict({"gpu_types": {"fast": {"count": 2, "speed": 2.0}, "slow": {"count": 8, "speed": 0.5}}})
    only_slow = est("s", 4, 3600, 1, gpu_types=("slow",))
    anywhere = est("a", 2, 3600, 5)
    plan = MilpPlanner().plan(cluster, [only_slow, anywhere], [], 0.0)
    by = plan.by_job()
    assert by["s"].gpu_type == "slow" and by["s"].end_s == 7200.0  # 3600 / 0.5
    assert by["a"].gpu_type == "fast" and by["a"].end_s == 1800.0  # earlier completion wins


def test_deadline_that_cannot_be_met_ranks_below_work_that_can():
    jobs = [est("late", 4, 3600, 9, deadline_s=1800.0), est("ok", 4, 3600, 2)]
    plan = MilpPlanner(PlannerConfig(mip_rel_gap=0.0)).plan(FOUR, jobs, [], 0.0)
    assert plan.by_job()["ok"].start_s == 0.0


def test_streaming_reservation_keeps_gpus_free_of_batch_work():
    jobs = [est(f"b{i}", 1, 3600, 3) for i in range(4)]
    plan = MilpPlanner().plan(FOUR, jobs, [], 0.0, streaming_reserve={"h100": 1})
    assert sum(1 for s in plan.starts if s.start_s == 0.0) == 3


def test_solver_disabled_or_failing_still_returns_a_feasible_greedy_plan():
    jobs = [est("A", 3, 3600, 5), est("B", 2, 3600, 4)]
    plan = MilpPlanner(PlannerConfig(use_solver=False)).plan(FOUR, jobs, [], 0.0)
    assert plan.report.method == "greedy" and len(plan.starts) == 2


def test_tiny_time_limit_falls_back_to_greedy_or_better():
    jobs = [est(f"j{i}", 1 + i % 4, 600 + 300 * (i % 7), 1 + i % 5) for i in range(120)]
    plan = MilpPlanner(PlannerConfig(time_limit_s=0.01)).plan(FOUR, jobs, [], 0.0)
    assert plan.report.objective >= plan.report.greedy_objective - 1e-6
    assert len(plan.starts) + len(plan.unplanned) == 120


def test_empty_queue_is_a_no_op():
    plan = MilpPlanner().plan(FOUR, [], [], 0.0)
    assert plan.starts == () and plan.report.method == "empty"


def test_grid_is_fine_near_now_and_coarser_later():
    points = start_grid(PlannerConfig(step_s=60, fine_points=4), 3600)
    gaps = [b - a for a, b in zip(points, points[1:], strict=False)]
    assert gaps[:4] == [60, 60, 60, 60] and max(gaps) > 60 and gaps == sorted(gaps)


# --------------------------------------------------------------------------- reliability (issue 5, point 2)


def _busy_queue(n=120):
    return [est(f"j{i}", 1 + i % 4, 600 + 300 * (i % 7), 1 + i % 5) for i in range(n)]


def test_a_failing_solver_gives_the_greedy_plan_marked_as_such(monkeypatch):
    from airflow_gpu_scheduler.core.planner.highs import HighsModel

    def broken(self, *args, **kwargs):
        raise RuntimeError("injected: HiGHS crashed")

    monkeypatch.setattr(HighsModel, "run", broken)
    jobs = _busy_queue(30)
    # A budget no loaded machine uses up building the model, so HiGHS is always reached (and fails).
    plan = MilpPlanner(PlannerConfig(time_limit_s=30.0)).plan(FOUR, jobs, [], 0.0)
    assert plan.report.method == "greedy" and plan.report.status == "error"
    assert "injected: HiGHS crashed" in plan.report.message
    assert len(plan.starts) + len(plan.unplanned) == len(jobs) and plan.starts
    print("faults injected: 1 (solver exception), survived: 1, jobs lost: 0")


def test_highs_is_never_given_more_than_what_is_left_of_the_cycle_budget(monkeypatch):
    # Checked on what HiGHS is told, not on wall-clock time (which a loaded machine stretches):
    # every solve's time limit ends by the cycle's deadline (up to MIN_SOLVE_S), and with
    # no budget left after building, HiGHS is not started at all.
    import time

    from airflow_gpu_scheduler.core.planner import MIN_SOLVE_S
    from airflow_gpu_scheduler.core.planner.highs import HighsModel

    calls = []
    original = HighsModel.run

    def spy(self, time_limit_s, *args, **kwargs):
        calls.append((time.perf_counter(), time_limit_s))
        return original(self, time_limit_s, *args, **kwargs)

    monkeypatch.setattr(HighsModel, "run", spy)
    jobs = _busy_queue()
    for limit in (0.3, 1.0, 3.0):
        calls.clear()
        began = time.perf_counter()
        plan = MilpPlanner(PlannerConfig(time_limit_s=limit, mip_rel_gap=0.0, max_milp_vars=800, window_vars=300)).plan(
            FOUR, jobs, [], 0.0
        )
        assert len(plan.starts) + len(plan.unplanned) == len(jobs)
        for at, given in calls:
            assert at + given <= began + limit + MIN_SOLVE_S + 1e-6, (limit, at - began, given)
        report = plan.report
        print(
            f"time limit {limit}s: method {report.method}, status {report.status}, {len(calls)} solve(s), "
            f"build {report.build_s:.3f}s, solve {report.solve_s:.3f}s, wall {report.wall_s:.3f}s"
        )
    calls.clear()
    tiny = MilpPlanner(PlannerConfig(time_limit_s=0.01)).plan(FOUR, jobs, [], 0.0).report
    assert calls == []
    assert tiny.method == "greedy" and tiny.status == "time_limit" and tiny.solve_s == 0.0
    assert "greedy plan used" in tiny.message


def test_a_handoff_that_uses_up_the_budget_does_not_start_highs(monkeypatch):
    # On a loaded machine (CI caught it) handing the model to HiGHS can take longer than
    # what was left of the cycle: HiGHS must then not be started with a token time limit
    # past the deadline; the greedy plan is applied, marked as such.
    import time

    import airflow_gpu_scheduler.core.planner.model as model_module
    from airflow_gpu_scheduler.core.planner.highs import HighsModel

    solves = []
    original_to_highs = model_module.to_highs

    def slow_handoff(model):
        loaded = original_to_highs(model)
        time.sleep(0.6)
        return loaded

    monkeypatch.setattr(model_module, "to_highs", slow_handoff)
    monkeypatch.setattr(HighsModel, "run", lambda self, *a, **k: solves.append(self))
    jobs = _busy_queue(30)
    report = MilpPlanner(PlannerConfig(time_limit_s=0.5)).plan(FOUR, jobs, [], 0.0).report
    assert solves == []
    assert report.method == "greedy" and report.status == "time_limit"
    assert "greedy plan used" in report.message


def test_whole_cluster_gang_is_planned_despite_the_streaming_reservation():
    # Batch work must leave the streaming reservation free, so a gang of every GPU could never
    # be planned while any reservation stands: with streaming arriving all day it would starve.
    from airflow_gpu_scheduler.core.levers import levers_for_plan, pool_name

    gang = est("gang", 4, 3600, 8, kind="training")
    small = est("small", 1, 600, 2)
    plan = MilpPlanner().plan(FOUR, [gang, small], [], 0.0, streaming_reserve={"h100": 1})
    assert "gang" in plan.by_job() and plan.unplanned == ()
    assert plan.streaming_reserve == {"h100": 0}
    # The levers leave room for it: the batch pool holds every GPU once it is due.
    start = plan.by_job()["gang"].start_s
    levers = levers_for_plan(plan, FOUR, [gang, small], [], start)
    assert levers.pool_slots[pool_name("h100")] == 4
    # Jobs that fit beside the reservation keep it whole.
    plan = MilpPlanner().plan(FOUR, [est("three", 3, 3600, 8, kind="training")], [], 0.0, streaming_reserve={"h100": 1})
    assert plan.streaming_reserve == {"h100": 1} and plan.by_job()["three"].start_s == 0.0


def test_streaming_job_starts_within_its_wait_budget_even_if_a_gang_waits_longer():
    # One GPU is busy until 1200 s; a 4-GPU gang can start then. An endpoint that arrived now
    # needs one of the three free GPUs for an hour: starting it delays the gang to 3600 s.
    # Judged by completion times alone the gang would go first (its delay costs more than the
    # endpoint's); but an endpoint started after its wait budget has lost its users.
    running = [RunningJob(est("r", 1, 1800, 1), "h100", start_s=-600.0)]
    gang = est("gang", 4, 4 * 3600, 8, kind="training")
    endpoint = Job("endpoint", 0.0, "realtime_inference", 1, estimate_s=3600, priority=8)
    plan = MilpPlanner(PlannerConfig(mip_rel_gap=0.0)).plan(FOUR, [gang, endpoint], running, 30.0)
    by = plan.by_job()
    assert by["endpoint"].start_s == 30.0
    assert by["gang"].start_s == 3630.0
    # Past its budget the endpoint earns no bonus: it still starts as soon as it fits, but
    # no longer ahead of the gang.
    plan = MilpPlanner(PlannerConfig(mip_rel_gap=0.0)).plan(FOUR, [gang, endpoint], running, 600.0)
    assert plan.by_job()["gang"].start_s == 1200.0


def test_a_near_promise_of_the_previous_plan_is_kept_against_a_newcomer():
    # The last plan drains the 4 GPUs for a gang at 600 s. A newcomer that meets its deadline
    # only if it starts now would take one of them and push the gang back an hour: worth it on
    # this cycle's objective alone, but then every arrival can undo a drain and a gang slips
    # all day. The promise is priced in, so the gang keeps its start.
    running = [RunningJob(est("r", 1, 1800, 1), "h100", start_s=-1200.0)]  # ends at 600
    gang = est("gang", 4, 3600, 5, kind="training")
    newcomer = est("newcomer", 1, 3600, 3, deadline_s=3700.0)
    planner = MilpPlanner(PlannerConfig(mip_rel_gap=0.0))
    fresh = planner.plan(FOUR, [gang, newcomer], running, 0.0).by_job()
    assert fresh["newcomer"].start_s == 0.0 and fresh["gang"].start_s == 3600.0
    kept = planner.plan(FOUR, [gang, newcomer], running, 0.0, previous={"gang": 600.0}).by_job()
    assert kept["gang"].start_s == 600.0 and kept["newcomer"].start_s >= 4200.0
    # A promise already past (what the gang waits for overran) or far ahead binds nothing.
    assert planner.plan(FOUR, [gang, newcomer], running, 0.0, previous={"gang": -60.0}).by_job() == fresh
    later = planner.plan(FOUR, [gang, newcomer], running, 0.0, previous={"gang": 600.0 + 2 * 3600}).by_job()
    assert later["newcomer"].start_s == 0.0


def test_a_promise_binds_only_once_gpus_sit_idle_for_it():
    # Every GPU is busy until 600 s: nothing has been drained for the gang yet, so its promise
    # costs nothing to break and the newcomer with a deadline goes first, as in a fresh plan.
    running = [RunningJob(est("r", 4, 1800, 1), "h100", start_s=-1200.0)]
    gang = est("gang", 4, 3600, 5, kind="training")
    newcomer = est("newcomer", 1, 3600, 3, deadline_s=4300.0)
    planner = MilpPlanner(PlannerConfig(mip_rel_gap=0.0))
    fresh = planner.plan(FOUR, [gang, newcomer], running, 0.0).by_job()
    assert fresh["newcomer"].start_s == 600.0 and fresh["gang"].start_s == 4200.0
    assert planner.plan(FOUR, [gang, newcomer], running, 0.0, previous={"gang": 600.0}).by_job() == fresh


# --------------------------------------------------------------------------- a soft streaming reservation


def test_soft_reservation_lets_a_gang_use_reserved_gpus_only_where_it_is_worth_more_than_the_streams():
    # One GPU is reserved for endpoints. Four 1-GPU jobs of priority 3 for an hour: a hard
    # reservation starts three now and one after an hour. A soft one prices the reserved GPU by
    # what endpoints brought per second recently: cheap streams let the fourth job start now
    # (and the plan hands the GPU to batch work), valuable ones keep it free. Starting the fourth
    # job an hour sooner is worth 10800 * 0.5 * 3600 / 86400 = 225 (its discount); the reserved
    # GPU-hour costs about 3600 x the streams' value per second.
    from airflow_gpu_scheduler.core.levers import levers_for_plan, pool_name

    jobs = [est(f"b{i}", 1, 3600, 3) for i in range(4)]
    soft = MilpPlanner(PlannerConfig(mip_rel_gap=0.0, reserve_penalty=1.0))
    cheap = soft.plans(FOUR, jobs, [], 0.0, {"h100": 1}, streaming_value_rate=0.01).milp
    assert all(s.start_s == 0.0 for s in cheap.starts)
    assert cheap.streaming_reserve == {"h100": 0}
    levers = levers_for_plan(cheap, FOUR, jobs, [], 0.0)
    assert levers.pool_slots[pool_name("h100")] == 4 and levers.pool_slots[pool_name("h100", True)] == 0
    # The objective pays for the reserved GPU-hour: 3 * 3600 for the job, less the streams' value.
    hard = MilpPlanner(PlannerConfig(mip_rel_gap=0.0)).plan(FOUR, jobs, [], 0.0, {"h100": 1})
    assert cheap.report.objective > hard.report.objective
    # The LP bound drops a soft reservation's rows (and its price): still a bound on either plan.
    bound, _ = soft.lp_bound(FOUR, jobs, [], 0.0, {"h100": 1})
    assert bound is not None and bound >= cheap.report.objective - 1e-6
    costly = soft.plans(FOUR, jobs, [], 0.0, {"h100": 1}, streaming_value_rate=1.0).milp
    assert sum(1 for s in costly.starts if s.start_s == 0.0) == 3
    assert costly.streaming_reserve == {"h100": 1}
    # Without streams seen, nothing is priced: the reservation costs nothing to use.
    free = soft.plans(FOUR, jobs, [], 0.0, {"h100": 1}).milp
    assert all(s.start_s == 0.0 for s in free.starts)


def test_soft_reservation_is_paid_only_for_gpus_no_endpoint_holds():
    # An endpoint holds the reserved GPU: batch work cannot use it (it is not free at all), and
    # the reservation is spread over no spare GPU, so no penalty applies and no plan breaks.
    endpoint = RunningJob(Job("ep", 0.0, "realtime_inference", 1, estimate_s=7200, priority=5), "h100", start_s=0.0)
    jobs = [est(f"b{i}", 1, 3600, 3) for i in range(4)]
    soft = MilpPlanner(PlannerConfig(mip_rel_gap=0.0, reserve_penalty=1.0))
    plan = soft.plans(FOUR, jobs, [endpoint], 0.0, {"h100": 1}, streaming_value_rate=1.0).milp
    assert sum(1 for s in plan.starts if s.start_s == 0.0) == 3
    assert plan.report.objective > 0


def test_windowed_search_prices_the_soft_reservation_like_the_whole_milp():
    # The same queue solved as one MILP and window by window: both pay for every reserved GPU
    # their plan uses, so the windows never accept a step that only looks better for ignoring it.
    from airflow_gpu_scheduler.core.planner.model import plan_value

    jobs = [est(f"j{i}", 1 + i % 2, 1200 + 600 * (i % 5), 1 + i % 4) for i in range(40)]  # all fit beside it
    cfg = PlannerConfig(reserve_penalty=1.0, max_milp_vars=50, window_vars=40)
    planner = MilpPlanner(cfg)
    plans = planner.plans(FOUR, jobs, [], 0.0, {"h100": 2}, streaming_value_rate=0.001)
    assert plans.milp.report.method == "milp-windows"
    cycle = planner.prepare(FOUR, jobs, [], 0.0, {"h100": 2}, {}, 0.001)
    index = {job.job_id: j for j, job in enumerate(cycle.jobs)}
    points = cycle.capacity.points
    chosen = {}
    for s in plans.milp.starts:
        j = index[s.job_id]
        chosen[j] = next(c for c in cycle.candidates[j] if points[c.point] == s.start_s and c.gpu_type == s.gpu_type)
    used = cycle.capacity.intrusion(cycle.jobs, chosen)["h100"]
    assert any(used) and cycle.capacity.intrusion_cost(cycle.jobs, chosen) > 0
    assert abs(plan_value(cycle.capacity, cycle.jobs, chosen) - plans.milp.report.objective) < 1e-6
    assert plans.milp.report.objective >= plans.milp.report.greedy_objective - 1e-6
