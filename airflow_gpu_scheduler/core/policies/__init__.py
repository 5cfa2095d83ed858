"""Dispatch policies: the baselines users would pick, and ours. One file each."""

from __future__ import annotations

from airflow_gpu_scheduler.core.policies.airflow_default import AirflowDefaultPolicy
from airflow_gpu_scheduler.core.policies.backfill import EasyBackfillPolicy
from airflow_gpu_scheduler.core.policies.base import ClusterState, Decision, Policy
from airflow_gpu_scheduler.core.policies.clairvoyant import ClairvoyantPolicy
from airflow_gpu_scheduler.core.policies.fifo import FifoPolicy
from airflow_gpu_scheduler.core.policies.milp import MilpPolicy

#: The policies a user could pick, ours last.
POLICY_NAMES = ("fifo", "airflow", "backfill", "milp")
#: Not policies anyone can run: they know every arrival and actual duration in advance.
YARDSTICKS = ("clairvoyant",)
#: What ``gpu-scheduler bench`` compares by default.
BENCHMARK_POLICIES = POLICY_NAMES + YARDSTICKS


def make_policy(name: str, scenario=None, **milp_options) -> Policy:
    """A fresh policy by its benchmark name (``scenario``: only the clairvoyant yardstick reads it)."""
    if name == "fifo":
        return FifoPolicy()
    if name == "airflow":
        return AirflowDefaultPolicy()
    if name == "backfill":
        return EasyBackfillPolicy()
    if name == "milp":
        return MilpPolicy(**milp_options)
    if name == "clairvoyant":
        if scenario is None:
            raise ValueError("the clairvoyant yardstick needs the scenario: it reads every job's future")
        return ClairvoyantPolicy(scenario.jobs)
    raise ValueError(f"unknown policy {name!r}; expected one of {', '.join(BENCHMARK_POLICIES)}")


__all__ = [
    "BENCHMARK_POLICIES",
    "POLICY_NAMES",
    "YARDSTICKS",
    "AirflowDefaultPolicy",
    "ClairvoyantPolicy",
    "ClusterState",
    "Decision",
    "EasyBackfillPolicy",
    "FifoPolicy",
    "MilpPolicy",
    "Policy",
    "make_policy",
]
