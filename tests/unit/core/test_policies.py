"""Each baseline's dispatch rule on small cases, run through the real simulator."""

from airflow_gpu_scheduler.core.policies import make_policy
from airflow_gpu_scheduler.core.simulate import simulate
from airflow_gpu_scheduler.core.workload import Cluster, Job

FOUR = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 1.0}}})


def job(job_id, submit, gpus, duration, priority=1.0, kind="quantization", **kw):
    return Job(job_id, submit, kind, gpus, duration_s=duration, estimate_s=duration, priority=priority, **kw)


def starts(policy, jobs, cluster=FOUR, horizon=100_000):
    result = simulate(cluster, jobs, make_policy(policy), horizon)
    return {j: o.start_s for j, o in result.outcomes.items()}


def test_fifo_head_of_line_blocks_everything_behind_it():
    jobs = [job("small0", 0, 2, 1000), job("gang", 10, 4, 1000, priority=9, kind="training"), job("small1", 20, 1, 100)]
    s = starts("fifo", jobs)
    # small1 fits at t=20 (2 GPUs free) but must wait behind the gang at the head.
    assert s["gang"] == 1000 and s["small1"] == 2000  # after the gang, which takes all 4 GPUs


def test_airflow_skips_the_gang_and_starts_smaller_later_jobs():
    stream = [job(f"q{i}", i * 50, 1, 400, priority=1, group="q.t") for i in range(30)]
    gang = job("gang", 10, 4, 1000, priority=9, kind="training")
    s = starts("airflow", [*stream, gang])
    # The 1-GPU jobs keep the pool busy: the 4-GPU job only starts once the stream stops.
    assert s["gang"] >= max(s[f"q{i}"] for i in range(30))


def test_backfill_never_delays_the_reservation():
    running = job("r", 0, 3, 1000)
    gang = job("gang", 10, 4, 500, priority=9, kind="training")
    short = job("short", 20, 1, 900, priority=1)  # ends at 920 < 1000: may backfill
    long = job("long", 30, 1, 5000, priority=1)  # would delay the gang: must wait
    s = starts("backfill", [running, gang, short, long])
    assert s["short"] == 20
    assert s["gang"] == 1000
    assert s["long"] >= 1500


def test_backfill_uses_gpus_the_reservation_leaves_over():
    cluster = Cluster.from_dict({"gpu_types": {"h100": {"count": 6, "speed": 1.0}}})
    running = job("r", 0, 4, 1000)
    gang = job("gang", 10, 4, 500, priority=9, kind="training")  # reserved at 1000, leaves 2 spare then
    long = job("long", 20, 1, 5000, priority=1)
    s = starts("backfill", [running, gang, long], cluster)
    assert s["long"] == 20 and s["gang"] == 1000


def test_milp_starts_the_gang_before_the_stream():
    stream = [job(f"q{i}", i * 50, 1, 400, priority=1, group="q.t") for i in range(30)]
    gang = job("gang", 10, 4, 1000, priority=9, kind="training")
    s = starts("milp", [*stream, gang])
    assert s["gang"] <= 600  # the first plan drains the pool for it instead of starving it
