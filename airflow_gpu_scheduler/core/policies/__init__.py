"""Dispatch policies: the baselines users would pick, and ours. One file each."""

from __future__ import annotations

from airflow_gpu_scheduler.core.policies.airflow_default import AirflowDefaultPolicy
from airflow_gpu_scheduler.core.policies.backfill import EasyBackfillPolicy
from airflow_gpu_scheduler.core.policies.base import ClusterState, Decision, Policy
from airflow_gpu_scheduler.core.policies.fifo import FifoPolicy
from airflow_gpu_scheduler.core.policies.milp import MilpPolicy

POLICY_NAMES = ("fifo", "airflow", "backfill", "milp")


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
    raise ValueError(f"unknown policy {name!r}; expected one of {', '.join(POLICY_NAMES)}")


__all__ = ["POLICY_NAMES", "ClusterState", "Decision", "Policy", "make_policy", "AirflowDefaultPolicy",
           "EasyBackfillPolicy", "FifoPolicy", "MilpPolicy"]
