"""Declaring GPU work: the one function data teams call to mark a task as GPU work.

Usage, identical for classic operators and TaskFlow::

    from airflow_gpu_scheduler.authoring import gpu_task

    BashOperator(task_id="train", bash_command="train.sh", **gpu_task("training", gpus=8, gpu_types=["h100"]))

    @task(**gpu_task("quantization", gpus=1, estimate=timedelta(minutes=20)))
    def quantize(): ...

Where the declaration lives, and why: ``gpu_task`` returns ordinary ``BaseOperator``
keyword arguments. The declaration itself goes into ``executor_config`` under the key
``"gpu_scheduler"``. On Airflow 3.3 ``executor_config`` is written into the task's entry
in the ``serialized_dag`` table as plain JSON (``{"__type": "dict", "__var": {...}}``
wrappers, verified on 3.3.2; mapped tasks carry it in ``partial_kwargs``). The
collector can therefore read it from the metadata database with one SELECT, without
importing DAG files and without unpickling anything (``task_instance.executor_config``
itself is a pickle column and is never read; :mod:`airflow_gpu_scheduler.cycle.serialized_dag`
reads it). Unlike ``params`` it is not shown in the
trigger form and cannot be overridden by a run's conf; unlike a custom template field it
needs no mixin class, so it works on every operator and on ``@task``. Executors ignore
unknown keys (the Kubernetes executor only reads ``pod_override``).

The task is also put in the intake pool (``gpu_intake``, zero slots) with
``pool_slots = gpus``, so nothing GPU-bound starts until a plan moves it to the pool of
a GPU type. Clearing a task resets it to these values; the next planning cycle plans it
again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow_gpu_scheduler.core.levers import INTAKE_POOL
from airflow_gpu_scheduler.core.workload import JobKind, WorkloadError

#: Key of the declaration inside ``executor_config``.
DECLARATION_KEY = "gpu_scheduler"
#: Version of the declaration format, stored with it so the collector can evolve.
DECLARATION_VERSION = 1

_FIELDS = {"version", "kind", "gpus", "gpu_types", "estimate_s", "priority", "deadline_s", "max_wait_s"}


@dataclass(frozen=True)
class GpuDeclaration:
    """What a task declares about its GPU needs (relative times, as in a DAG file).

    :param kind: one of ``training``, ``realtime_inference``, ``batch_inference``, ``quantization``.
    :param gpus: GPUs the task needs at once (a gang: all or nothing).
    :param gpu_types: GPU types it may run on; empty means any.
    :param estimate_s: expected runtime in seconds on a speed-1.0 GPU; ``None`` to learn it from history.
    :param priority: relative value of the work (> 0).
    :param deadline_s: seconds after the task becomes ready by which it should finish.
    :param max_wait_s: for real-time inference, how long it may wait to start.
    """

    kind: JobKind
    gpus: int
    gpu_types: tuple[str, ...] = ()
    estimate_s: float | None = None
    priority: float = 1.0
    deadline_s: float | None = None
    max_wait_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": DECLARATION_VERSION,
            "kind": self.kind.value,
            "gpus": self.gpus,
            "gpu_types": list(self.gpu_types),
            "priority": self.priority,
        }
        for name in ("estimate_s", "deadline_s", "max_wait_s"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


def _seconds(value: Any, subject: str, field_name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise WorkloadError(subject, field_name, f"expected a positive number of seconds or a timedelta, got {value!r}")
    return float(value)


def parse_declaration(raw: Any, subject: str = "task") -> GpuDeclaration:
    """Validate a declaration read back from JSON; raises :class:`WorkloadError` naming the field.

    :param raw: the ``executor_config["gpu_scheduler"]`` object.
    :param subject: names the task in error messages.
    """
    if not isinstance(raw, Mapping):
        raise WorkloadError(subject, DECLARATION_KEY, f"expected an object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise WorkloadError(subject, unknown[0], f"unknown declaration field; allowed: {sorted(_FIELDS)}")
    if "kind" not in raw:
        raise WorkloadError(subject, "kind", "missing")
    kind = JobKind.parse(raw["kind"], subject)
    gpus = raw.get("gpus", 1)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus <= 0:
        raise WorkloadError(subject, "gpus", f"must be a positive integer, got {gpus!r}")
    gpu_types = raw.get("gpu_types") or ()
    if isinstance(gpu_types, str) or not isinstance(gpu_types, Iterable):
        raise WorkloadError(subject, "gpu_types", f"must be a list of GPU type names, got {gpu_types!r}")
    gpu_types = tuple(gpu_types)
    if not all(isinstance(t, str) and t for t in gpu_types):
        raise WorkloadError(subject, "gpu_types", f"names must be non-empty strings, got {list(gpu_types)!r}")
    priority = raw.get("priority", 1.0)
    if isinstance(priority, bool) or not isinstance(priority, (int, float)) or not priority > 0:
        raise WorkloadError(subject, "priority", f"must be a number > 0, got {priority!r}")
    return GpuDeclaration(
        kind=kind,
        gpus=gpus,
        gpu_types=gpu_types,
        estimate_s=_seconds(raw.get("estimate_s"), subject, "estimate_s"),
        priority=float(priority),
        deadline_s=_seconds(raw.get("deadline_s"), subject, "deadline_s"),
        max_wait_s=_seconds(raw.get("max_wait_s"), subject, "max_wait_s"),
    )


def gpu_task(
    kind: str | JobKind,
    gpus: int = 1,
    *,
    gpu_types: Iterable[str] = (),
    estimate: timedelta | float | None = None,
    priority: float = 1.0,
    deadline: timedelta | float | None = None,
    max_wait: timedelta | float | None = None,
    executor_config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Operator keyword arguments that declare a task as GPU work.

    Spread them into any operator or ``@task``: ``MyOperator(task_id=..., **gpu_task("training", 4))``.
    Invalid values raise :class:`~airflow_gpu_scheduler.core.workload.WorkloadError` when the
    DAG file is parsed, so a bad declaration shows up as a DAG import error naming the field.

    :param kind: ``training``, ``realtime_inference``, ``batch_inference`` or ``quantization``.
    :param gpus: GPUs needed at once; also becomes the task's ``pool_slots``.
    :param gpu_types: GPU types the task may run on (names from the cluster config); empty means any.
    :param estimate: expected runtime on a speed-1.0 GPU (timedelta or seconds); omit to learn it
        from the successful runs of the same ``dag_id.task_id``.
    :param priority: value of the work relative to other GPU work (> 0).
    :param deadline: finish within this long after the task becomes ready (timedelta or seconds).
    :param max_wait: real-time inference only: longest acceptable wait before starting.
    :param executor_config: an existing ``executor_config`` to merge the declaration into.
    :return: ``{"pool": "gpu_intake", "pool_slots": gpus, "executor_config": {..., "gpu_scheduler": {...}}}``
    """
    raw = {
        "kind": kind.value if isinstance(kind, JobKind) else kind,
        "gpus": gpus,
        "gpu_types": list(gpu_types) if not isinstance(gpu_types, str) else gpu_types,
        "priority": priority,
        "estimate_s": estimate,
        "deadline_s": deadline,
        "max_wait_s": max_wait,
    }
    declaration = parse_declaration(raw, subject="gpu_task()")
    config = dict(executor_config or {})
    if DECLARATION_KEY in config:
        raise WorkloadError("gpu_task()", "executor_config", f"already holds a {DECLARATION_KEY!r} key")
    config[DECLARATION_KEY] = declaration.to_json()
    return {"pool": INTAKE_POOL, "pool_slots": declaration.gpus, "executor_config": config}
