"""The demo's workload, in one place: the cluster, the four kinds of GPU work, and when each job arrives.

Read by the demo's DAG file (``dags/gpu_demo_workload.py``: what each task declares) and by
``gpu-scheduler demo`` (when to trigger each job, how long it runs, and the same jobs for the
core's simulator). Plain data, no Airflow import.

The shape is the problem the provider exists for: a stream of small 1-GPU quantization jobs
keeps the GPUs busy; a 4-GPU training gang arrives among them and Airflow alone starts it only
when the stream leaves four GPUs free at once; 2-GPU batch inference waits the same way; a
real-time endpoint must start within its wait budget. Jobs run for tens of seconds, so task
start-up (a few seconds) and the planning cadence are a small part of each job.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_gpu_scheduler.core.workload import Cluster, Job, JobKind

GPU_TYPE = "h100"
GPUS = 6
CLUSTER = Cluster.from_dict({"gpu_types": {GPU_TYPE: {"count": GPUS, "speed": 1.0}}})
#: Pool of the "Airflow alone" DAGs: one slot per GPU, as a platform team would set it up without a planner.
ALONE_POOL = "demo_airflow_alone"


@dataclass(frozen=True)
class DemoKind:
    """What one kind of demo job declares (the same for every job of the kind).

    :param task_id: the task's id in both DAGs of the kind.
    :param estimate_s: the declared estimate; each job's actual length varies around it.
    :param deadline_s: finish within this long after becoming ready (``None``: no deadline).
    :param max_wait_s: the real-time endpoint's wait budget.
    """

    kind: JobKind
    task_id: str
    gpus: int
    estimate_s: float
    priority: float
    deadline_s: float | None = None
    max_wait_s: float | None = None


KINDS = {
    JobKind.TRAINING: DemoKind(JobKind.TRAINING, "finetune", gpus=4, estimate_s=50.0, priority=10.0, deadline_s=100.0),
    JobKind.REALTIME_INFERENCE: DemoKind(
        JobKind.REALTIME_INFERENCE, "serve", gpus=1, estimate_s=40.0, priority=5.0, max_wait_s=20.0
    ),
    JobKind.BATCH_INFERENCE: DemoKind(JobKind.BATCH_INFERENCE, "score", gpus=2, estimate_s=30.0, priority=3.0),
    JobKind.QUANTIZATION: DemoKind(JobKind.QUANTIZATION, "quantize", gpus=1, estimate_s=25.0, priority=1.0),
}


@dataclass(frozen=True)
class Arrival:
    """One job of the demo: when it arrives (seconds after the first) and how long it really runs."""

    name: str
    at_s: float
    kind: JobKind
    seconds: float


def _arrivals() -> tuple[Arrival, ...]:
    q, b = JobKind.QUANTIZATION, JobKind.BATCH_INFERENCE
    # Actual lengths vary around the estimates (about +-20 %), as real runtimes do.
    quant = [
        (0, 22),
        (0, 27),
        (1, 24),
        (2, 29),
        (3, 21),
        (6, 26),
        (10, 23),
        (14, 28),
        (18, 22),
        (22, 27),
        (26, 24),
        (30, 26),
        (34, 23),
        (38, 25),
        (42, 21),
        (46, 28),
        (50, 24),
        (54, 22),
        (58, 27),
        (62, 25),
        (66, 23),
        (70, 26),
        (74, 22),
        (78, 28),
    ]
    out = [Arrival(f"quantize_{i:02d}", at, q, s) for i, (at, s) in enumerate(quant)]
    out += [
        Arrival("finetune", 8, JobKind.TRAINING, 52),
        Arrival("score_0", 16, b, 28),
        Arrival("score_1", 40, b, 33),
        Arrival("endpoint", 75, JobKind.REALTIME_INFERENCE, 40),
    ]
    return tuple(sorted(out, key=lambda a: (a.at_s, a.name)))


ARRIVALS = _arrivals()
#: The evaluation window of both runs and of the simulator, from the first arrival (as in the benchmark:
#: work finished after it earns nothing).
WINDOW_S = 150.0


def dag_id(kind: JobKind, planned: bool) -> str:
    """``demo_planned_training`` (declared with ``gpu_task``) or ``demo_alone_training`` (plain Airflow)."""
    return f"demo_{'planned' if planned else 'alone'}_{kind.value}"


def jobs(submit_s: dict[str, float] | None = None) -> list[Job]:
    """The demo's jobs for the core: declared estimates, actual lengths as durations.

    :param submit_s: when each job actually became ready (seconds after the first arrival),
        by arrival name; default: the planned arrival times.
    """
    out = []
    for arrival in ARRIVALS:
        spec = KINDS[arrival.kind]
        submit = (submit_s or {}).get(arrival.name, arrival.at_s)
        out.append(
            Job(
                job_id=arrival.name,
                submit_s=submit,
                kind=arrival.kind,
                gpus=spec.gpus,
                duration_s=arrival.seconds,
                estimate_s=spec.estimate_s,
                priority=spec.priority,
                gpu_types=(GPU_TYPE,),
                group=arrival.kind.value,
                max_wait_s=spec.max_wait_s,
                deadline_s=None if spec.deadline_s is None else submit + spec.deadline_s,
            )
        )
    return out
