"""Why-waiting reasons on small plans whose binding reason is known by construction."""

from airflow_gpu_scheduler.core.planner import MilpPlanner, Plan, PlannedStart, PlannerConfig, SolveReport
from airflow_gpu_scheduler.core.waiting import clock, waiting_reasons
from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob

NOW = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC
CLUSTER = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 1.0}, "a100": {"count": 2, "speed": 1.0}}})
REPORT = SolveReport("milp", "optimal", 1.0, 1.0, 1.0, 0.0, 0.01)


def job(job_id, gpus, estimate=600.0, priority=1.0, kind="batch_inference", **kw):
    return Job(job_id, NOW - 10, kind, gpus, estimate_s=estimate, priority=priority, **kw)


def plan(*starts, reserve=None):
    return Plan(
        NOW,
        tuple(PlannedStart(j, t, s, e, rank, False) for rank, (j, t, s, e) in enumerate(starts)),
        (),
        REPORT,
        reserve or {},
    )


def test_busy_names_the_gpu_type_and_when_it_frees():
    running = [RunningJob(job("r1", 2, 300), "h100", NOW - 100), RunningJob(job("r2", 2, 900), "h100", NOW - 100)]
    gang = job("gang", 4, kind="training", gpu_types=("h100",))
    reasons = waiting_reasons(plan(("gang", "h100", NOW + 800, NOW + 1400)), CLUSTER, [gang], running, NOW)
    assert reasons["gang"].code == "busy"
    assert reasons["gang"].text == f"all 4 h100 GPUs are busy until {clock(NOW + 800)}"
    assert reasons["gang"].until_s == NOW + 800


def test_busy_with_some_gpus_free_says_how_many():
    running = [RunningJob(job("r1", 3, 300), "h100", NOW - 100)]
    gang = job("gang", 2, gpu_types=("h100",))
    reasons = waiting_reasons(plan(("gang", "h100", NOW + 200, NOW + 800)), CLUSTER, [gang], running, NOW)
    assert reasons["gang"].code == "busy"
    assert "needs 2 h100 GPUs; only 1 of 4 are free until" in reasons["gang"].text


def test_reserved_for_a_more_valuable_gang_planned_first():
    # 2 GPUs busy for 5 minutes; the training gang takes all 4 then. A 2-GPU, 10-minute job
    # fits now but would still hold 2 GPUs when the gang is due: it waits for the gang.
    running = [RunningJob(job("r", 2, 400), "h100", NOW - 100)]
    train = job("train", 4, estimate=1200, priority=9, kind="training", gpu_types=("h100",))
    small = job("small", 2, estimate=600, gpu_types=("h100",))
    p = plan(("train", "h100", NOW + 300, NOW + 1500), ("small", "h100", NOW + 1500, NOW + 2100))
    reasons = waiting_reasons(p, CLUSTER, [train, small], running, NOW)
    assert reasons["train"].code == "busy"
    assert reasons["small"].code == "reserved" and reasons["small"].blocking_job == "train"
    assert (
        reasons["small"].text
        == f"h100 GPUs reserved for training job train (priority 9), which starts at {clock(NOW + 300)}"
    )


def test_held_for_the_streaming_reservation():
    batch = job("batch", 2, gpu_types=("a100",))
    reasons = waiting_reasons(
        plan(("batch", "a100", NOW + 600, NOW + 1200), reserve={"a100": 1}), CLUSTER, [batch], [], NOW
    )
    assert reasons["batch"].code == "streaming"
    assert reasons["batch"].text == (
        "held for the streaming reservation: 1 of the 2 free a100 GPUs are kept for real-time inference"
    )


def test_released_jobs_have_no_reason_and_a_free_later_start_says_so():
    now_job, later_job = job("now", 1), job("later", 1)
    p = plan(("now", "h100", NOW, NOW + 600), ("later", "h100", NOW + 60, NOW + 660))
    reasons = waiting_reasons(p, CLUSTER, [now_job, later_job], [], NOW)
    assert "now" not in reasons
    assert reasons["later"].code == "later" and clock(NOW + 60) in reasons["later"].text
    assert waiting_reasons(p, CLUSTER, [now_job, later_job], [], NOW, release_ahead_s=60) == {}


def test_too_big_and_unplanned():
    huge = job("huge", 8, gpu_types=("h100",))
    lost = job("lost", 2)
    p = Plan(NOW, (), ("huge", "lost"), REPORT, {})
    reasons = waiting_reasons(p, CLUSTER, [huge, lost], [], NOW)
    assert reasons["huge"].code == "too_big"
    assert reasons["huge"].text == "no allowed GPU type has 8 GPUs (allowed: h100)"
    assert reasons["lost"].code == "horizon" and "h100, a100" in reasons["lost"].text


def test_every_held_job_of_a_real_plan_gets_a_reason():
    running = [RunningJob(job(f"r{i}", 1, 300), "h100", NOW - 60) for i in range(3)]
    queued = [job("train", 4, 900, priority=10, kind="training", gpu_types=("h100",))]
    queued += [job(f"q{i}", 1, 450, kind="quantization") for i in range(6)]
    p = MilpPlanner(PlannerConfig(step_s=30.0, horizon_s=7200.0)).plan(CLUSTER, queued, running, NOW)
    held = {s.job_id for s in p.starts if s.start_s > NOW} | set(p.unplanned)
    reasons = waiting_reasons(p, CLUSTER, queued, running, NOW)
    assert set(reasons) == held and held
    assert reasons["train"].code == "busy"
    assert all(r.text for r in reasons.values())


def test_busy_then_promised_to_a_gang_names_the_gang():
    # 3 of 4 GPUs busy for 5 minutes; then the training gang takes all 4 for 20 minutes.
    running = [RunningJob(job("r", 3, 400), "h100", NOW - 100)]
    train = job("train", 4, estimate=1200, priority=9, kind="training", gpu_types=("h100",))
    pair = job("pair", 2, estimate=600, gpu_types=("h100",))
    p = plan(("train", "h100", NOW + 300, NOW + 1500), ("pair", "h100", NOW + 1500, NOW + 2100))
    reasons = waiting_reasons(p, CLUSTER, [train, pair], running, NOW)
    assert reasons["train"].code == "busy"
    assert reasons["pair"].code == "reserved" and reasons["pair"].blocking_job == "train"
    assert reasons["pair"].text == (
        f"needs 2 h100 GPUs; only 1 of 4 are free until {clock(NOW + 300)}, "
        "and then training job train (priority 9) goes first"
    )
