"""Declarations and default weights out of a ``serialized_dag.data`` document (plain JSON).

The hook reads ``serialized_dag`` rows with one SELECT; these functions find, in the JSON, each
task's ``executor_config["gpu_scheduler"]`` declaration (see
:mod:`airflow_gpu_scheduler.authoring.declare` for why it lives there) and the priority weight
Airflow itself would give it. No DAG file is imported and nothing is unpickled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_gpu_scheduler.authoring.declare import DECLARATION_KEY


def decode_serialized(value: Any) -> Any:
    """Strip Airflow's ``{"__type": ..., "__var": ...}`` serialization wrappers from plain JSON data."""
    if isinstance(value, Mapping):
        if "__var" in value and "__type" in value:
            return decode_serialized(value["__var"])
        return {k: decode_serialized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_serialized(v) for v in value]
    return value


def declarations_from_serialized_dag(data: Mapping[str, Any]) -> dict[str, Any]:
    """``{task_id: raw declaration}`` for every declared task of one ``serialized_dag.data`` document.

    Reads ``executor_config`` of plain tasks and ``partial_kwargs.executor_config`` of mapped ones.
    """
    out: dict[str, Any] = {}
    for wrapped in (data.get("dag") or {}).get("tasks", []):
        task = wrapped.get("__var", wrapped) if isinstance(wrapped, Mapping) else {}
        config = task.get("executor_config")
        if config is None:
            config = (decode_serialized(task.get("partial_kwargs") or {})).get("executor_config")
        config = decode_serialized(config) if config is not None else None
        if isinstance(config, Mapping) and DECLARATION_KEY in config:
            out[task["task_id"]] = config[DECLARATION_KEY]
    return out


def default_weights_from_serialized_dag(data: Mapping[str, Any]) -> dict[str, int]:
    """``{task_id: priority weight}`` as Airflow itself computes it for one ``serialized_dag.data`` document.

    Used to hand work back to Airflow's own order when the planner is down (fail-open).
    Mirrors ``priority_weight_total`` for the built-in rules: ``absolute`` (own weight),
    ``downstream`` (own + every task downstream; Airflow's default) and ``upstream``. A custom
    weight strategy cannot be evaluated without the DAG code, so it gets the task's own weight.
    Serialization omits defaults: weight 1, rule ``downstream``.
    """
    own: dict[str, int] = {}
    rule: dict[str, str] = {}
    downstream: dict[str, list[str]] = {}
    for wrapped in (data.get("dag") or {}).get("tasks", []):
        task = wrapped.get("__var", wrapped) if isinstance(wrapped, Mapping) else {}
        if "task_id" not in task:
            continue
        partial = decode_serialized(task.get("partial_kwargs") or {})
        weight = task.get("priority_weight", partial.get("priority_weight", 1))
        own[task["task_id"]] = weight if isinstance(weight, int) and not isinstance(weight, bool) else 1
        value = decode_serialized(task.get("weight_rule", partial.get("weight_rule", "downstream")))
        rule[task["task_id"]] = value if isinstance(value, str) else "custom"
        downstream[task["task_id"]] = [t for t in task.get("downstream_task_ids") or [] if isinstance(t, str)]
    upstream: dict[str, list[str]] = {t: [] for t in own}
    for task_id, children in downstream.items():
        for child in children:
            upstream.setdefault(child, []).append(task_id)

    def relatives(task_id: str, edges: Mapping[str, list[str]]) -> set[str]:
        seen: set[str] = set()
        stack = list(edges.get(task_id, []))
        while stack:
            other = stack.pop()
            if other not in seen:
                seen.add(other)
                stack.extend(edges.get(other, []))
        return seen

    out: dict[str, int] = {}
    for task_id, weight in own.items():
        if rule[task_id] == "downstream":
            out[task_id] = weight + sum(own.get(t, 0) for t in relatives(task_id, downstream))
        elif rule[task_id] == "upstream":
            out[task_id] = weight + sum(own.get(t, 0) for t in relatives(task_id, upstream))
        else:
            out[task_id] = weight
    return out
