"""The provider's ``[gpu_scheduler]`` settings: declared once here, read with Airflow's ``conf``.

:func:`~airflow_gpu_scheduler.get_provider_info.get_provider_info` declares them under ``config``,
so ``airflow config list --section gpu_scheduler`` shows them and ``AIRFLOW__GPU_SCHEDULER__<NAME>``
(or ``airflow.cfg``) sets them. Operator arguments override them. A value that is not valid fails
with an error naming the option, its environment variable and the value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from airflow_gpu_scheduler.cycle.cluster_config import CLUSTER_VARIABLE

SECTION = "gpu_scheduler"


@dataclass(frozen=True)
class Option:
    """One setting: its name, type (as Airflow's provider schema spells it), default and why it exists."""

    name: str
    type: str  # "string" | "integer" | "float"
    default: str
    description: str
    example: str | None = None

    @property
    def env_var(self) -> str:
        return f"AIRFLOW__{SECTION.upper()}__{self.name.upper()}"


OPTIONS: tuple[Option, ...] = (
    Option(
        "metadata_conn_id",
        "string",
        "gpu_scheduler_metadata",
        "Airflow connection to Airflow's own metadata database, which the planner reads and writes "
        "(type ``gpu_scheduler_metadata``; older ``postgres``/``mysql``/``sqlite`` connections work too).",
    ),
    Option(
        "cluster_variable",
        "string",
        CLUSTER_VARIABLE,
        "Airflow Variable holding the cluster JSON (GPU types, their GPU counts, speeds and queues).",
    ),
    Option(
        "planning_budget_s",
        "float",
        "2.0",
        "Wall-clock budget of one planning cycle in seconds (model building and HiGHS); the greedy plan "
        "is applied when nothing better is found in time.",
        "10",
    ),
    Option(
        "planning_step_s",
        "float",
        "60.0",
        "Spacing in seconds of the start times the planner considers near now (it doubles further out). "
        "Take about a tenth of a typical job's length.",
        "300",
    ),
    Option(
        "planning_horizon_s",
        "float",
        "86400.0",
        "How far ahead in seconds the planner places starts; work beyond it waits for a later cycle.",
    ),
    Option(
        "cycle_interval_s",
        "float",
        "10.0",
        "Seconds between full planning cycles inside one run of the planning task when nothing happens "
        "(each confirms the plan: the planner's heartbeat); arrivals and ends are acted on sooner, see "
        "watch_interval_s.",
        "5",
    ),
    Option(
        "watch_interval_s",
        "float",
        "1.0",
        "Seconds between the planning task's cheap looks at GPU task instances between cycles: a GPU task "
        "that arrives, starts or ends triggers a cycle at once, which re-applies the current plan (its next "
        "job on freed GPUs) and re-solves only when the re-planning rule says so.",
        "0.5",
    ),
    Option(
        "replan_interval_s",
        "float",
        "60.0",
        "While GPU work keeps arriving and ending, the plan is solved again at least this often; sooner when "
        "GPUs turn idle that the plan did not expect or a real-time job has no place.",
        "30",
    ),
    Option(
        "fail_open_after_s",
        "float",
        "300.0",
        "The fail-open watchdog hands held GPU work back to Airflow's own order after this many seconds "
        "without an applied plan while work has waited that long.",
    ),
    Option(
        "history_rows",
        "integer",
        "2000",
        "Finished GPU task instances read each cycle to learn missing estimates and to size the streaming reservation.",
    ),
    Option(
        "plan_retention_days",
        "float",
        "30",
        "How many days stored plans (``gpu_sched_plan`` and ``gpu_sched_plan_job``) are kept, so plan "
        "storage stays bounded.",
        "7",
    ),
)
_BY_NAME = {option.name: option for option in OPTIONS}


class GpuSchedulerConfigError(ValueError):
    """A ``[gpu_scheduler]`` setting has a value that cannot be used; the message names it."""


def provider_config() -> dict:
    """The ``config`` entry of the provider info (Airflow's ``provider_info.schema.json`` format)."""
    return {
        SECTION: {
            "description": "Settings of the GPU scheduler provider (airflow-gpu-scheduler). Operator arguments "
            "override them.",
            "options": {
                o.name: {
                    "description": o.description,
                    "version_added": "0.1.0",
                    "type": o.type,
                    "example": o.example,
                    "default": o.default,
                }
                for o in OPTIONS
            },
        }
    }


def _conf():
    # The Task SDK's conf inside a worker; core's elsewhere (scheduler, api-server, CLI).
    try:
        from airflow.sdk.configuration import conf
    except ImportError:  # pragma: no cover - task SDKs before 1.2
        from airflow.configuration import conf
    return conf


def get(name: str) -> str | int | float:
    """The value of one ``[gpu_scheduler]`` option, converted to its type; the declared default if unset."""
    option = _BY_NAME[name]
    raw = _conf().get(SECTION, name, fallback=option.default)
    raw = option.default if raw is None or str(raw).strip() == "" else str(raw).strip()
    if option.type == "string":
        return raw
    where = f"[{SECTION}] {name} = {raw!r} ({option.env_var})"
    try:
        value = int(raw) if option.type == "integer" else float(raw)
    except ValueError:
        kind = "a whole number" if option.type == "integer" else "a number"
        raise GpuSchedulerConfigError(f"{where} is not {kind}; default {option.default}") from None
    if not math.isfinite(value) or value <= 0:
        raise GpuSchedulerConfigError(f"{where} must be > 0; default {option.default}")
    return value


def get_str(name: str) -> str:
    return str(get(name))


def get_float(name: str) -> float:
    return float(get(name))


def get_int(name: str) -> int:
    return int(get(name))
