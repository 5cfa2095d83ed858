"""Airflow metrics of every planning cycle, so a platform's existing dashboards and alerts see the planner.

Emitted through Airflow's ``Stats`` (StatsD, Datadog or OpenTelemetry, whatever ``[metrics]``
configures; Airflow prepends its ``statsd_prefix``, ``airflow.`` by default). Names:

- ``gpu_scheduler.cycle.duration`` (timer, ms): one whole cycle (collect, plan, apply, record).
- ``gpu_scheduler.plan.duration`` (timer, ms): the planner's own wall time (model build and solve).
- ``gpu_scheduler.plan.status.<status>`` and ``gpu_scheduler.plan.method.<method>`` (counters):
  the solver's termination status (``optimal``, ``time_limit``...) and ``milp``/``milp-windows``/``greedy``.
- ``gpu_scheduler.plan.gap`` (gauge): the MIP gap of the applied plan (absent when unknown).
- ``gpu_scheduler.tasks.waiting|held|released|running|rejected`` (gauges): GPU task instances
  waiting for a plan, held back by it, released to a GPU pool, running, refused for a bad declaration.
- ``gpu_scheduler.gpus.busy.<gpu_type>`` (gauge): GPUs of that type held by running task instances.
- ``gpu_scheduler.plan.utilization`` and ``gpu_scheduler.plan.utilization_airflow`` (gauges): GPU
  utilization over the next hour predicted for the plan and for Airflow's own dispatch of the same queue.
- ``gpu_scheduler.cycles`` (counter): cycles run, including those with nothing to plan.

The fail-open watchdog's ``gpu_scheduler.fail_open*`` and ``gpu_scheduler.plan_age_s`` are its own.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from airflow_gpu_scheduler.core.levers import gpu_type_of_pool

PREFIX = "gpu_scheduler"
_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]")


def stats():
    """Airflow's ``Stats``: the Task SDK's inside a worker (initialized from ``[metrics]``), core's elsewhere."""
    try:
        from airflow.sdk.observability.stats import Stats
    except ImportError:  # pragma: no cover - task SDKs before 1.2
        from airflow.stats import Stats
    return Stats


def gpus_busy(running: Iterable[Any], gpu_types: Iterable[str] = ()) -> dict[str, int]:
    """GPUs held per GPU type by running task instances (their ``pool`` and ``pool_slots``).

    Every type in ``gpu_types`` is reported, idle ones as 0: a StatsD gauge keeps its last value,
    so a type that goes idle must say so.
    """
    busy: dict[str, int] = dict.fromkeys(gpu_types, 0)
    for ti in running:
        gpu_type = gpu_type_of_pool(ti.pool)
        if gpu_type:
            busy[gpu_type] = busy.get(gpu_type, 0) + int(ti.pool_slots or 0)
    return busy


def _name(*parts: str) -> str:
    return ".".join([PREFIX, *(_UNSAFE.sub("_", str(p)) for p in parts)])


def emit_cycle_metrics(summary: Mapping[str, Any], cycle_s: float) -> None:
    """Send one cycle's numbers (from the summary :func:`schedule_cycle` returns) to Airflow's metrics."""
    s = stats()
    s.incr(_name("cycles"))
    s.timing(_name("cycle", "duration"), cycle_s * 1000.0)
    if summary.get("locked_out"):
        return
    held = int(summary.get("held") or 0)
    released = len(summary.get("released") or [])
    for name, value in (
        ("waiting", summary.get("waiting")),
        ("held", held),
        ("released", released),
        ("running", summary.get("running")),
        ("rejected", len(summary.get("rejected") or {})),
    ):
        s.gauge(_name("tasks", name), float(value or 0))
    for gpu_type, busy in (summary.get("gpus_busy") or {}).items():
        s.gauge(_name("gpus", "busy", gpu_type), float(busy))
    if summary.get("noop") or summary.get("solved") is False:
        return  # a cycle that kept applying the plan made no new one
    s.timing(_name("plan", "duration"), float(summary.get("solve_wall_s") or 0.0) * 1000.0)
    s.incr(_name("plan", "status", summary.get("status") or "unknown"))
    s.incr(_name("plan", "method", summary.get("method") or "unknown"))
    gap = summary.get("gap")
    if gap is not None and math.isfinite(gap):
        s.gauge(_name("plan", "gap"), float(gap))
    predicted = summary.get("predicted") or {}
    for who, name in (("plan", "utilization"), ("airflow", "utilization_airflow")):
        value = (predicted.get(who) or {}).get("utilization") if isinstance(predicted, Mapping) else None
        if isinstance(value, (int, float)) and math.isfinite(value):
            s.gauge(_name("plan", name), float(value))


def reported(cycle: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """Decorate the planning cycle: time it and emit its metrics. A metrics failure never fails the cycle."""

    @functools.wraps(cycle)
    def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        started = time.perf_counter()
        summary = cycle(*args, **kwargs)
        try:
            emit_cycle_metrics(summary, time.perf_counter() - started)
        except Exception as error:  # noqa: BLE001 - the plan is applied already; metrics must not fail the task
            logging.getLogger(__name__).warning("GPU scheduler metrics not sent: %s: %s", type(error).__name__, error)
        return summary

    return run
