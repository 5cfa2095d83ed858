"""The ``[gpu_scheduler]`` settings: declared in the provider info, read with Airflow's conf, overridden by
operators."""

from __future__ import annotations

import pytest

from airflow_gpu_scheduler import config
from airflow_gpu_scheduler.get_provider_info import get_provider_info
from airflow_gpu_scheduler.hooks.metadata import GpuSchedulerMetadataHook
from airflow_gpu_scheduler.operators.fail_open import GpuFailOpenOperator
from airflow_gpu_scheduler.operators.schedule import GpuScheduleOperator, configured_planner


def test_every_option_is_declared_with_its_default():
    options = get_provider_info()["config"]["gpu_scheduler"]["options"]
    assert (
        set(options)
        == {o.name for o in config.OPTIONS}
        >= {
            "metadata_conn_id",
            "cluster_variable",
            "planning_budget_s",
            "cycle_interval_s",
            "fail_open_after_s",
            "history_rows",
            "plan_retention_days",
        }
    )
    for option in config.OPTIONS:
        assert options[option.name]["default"] == option.default
        assert str(config.get(option.name)) == str(type(config.get(option.name))(option.default))
    assert config.get_str("metadata_conn_id") == GpuSchedulerMetadataHook.default_conn_name


def test_environment_variables_set_the_options(monkeypatch):
    monkeypatch.setenv("AIRFLOW__GPU_SCHEDULER__PLANNING_BUDGET_S", "7.5")
    monkeypatch.setenv("AIRFLOW__GPU_SCHEDULER__PLANNING_STEP_S", "30")
    monkeypatch.setenv("AIRFLOW__GPU_SCHEDULER__HISTORY_ROWS", "50")
    monkeypatch.setenv("AIRFLOW__GPU_SCHEDULER__METADATA_CONN_ID", "my_meta")
    planner = configured_planner()
    assert (planner.time_limit_s, planner.step_s) == (7.5, 30.0)
    hook = GpuSchedulerMetadataHook()
    assert (hook.gpu_scheduler_conn_id, hook.history_rows) == ("my_meta", 50)


@pytest.mark.parametrize(("value", "why"), [("soon", "is not a number"), ("-1", "must be > 0"), ("nan", "must be > 0")])
def test_a_bad_value_names_the_option_and_its_variable(monkeypatch, value, why):
    monkeypatch.setenv("AIRFLOW__GPU_SCHEDULER__FAIL_OPEN_AFTER_S", value)
    with pytest.raises(
        config.GpuSchedulerConfigError,
        match=rf"\[gpu_scheduler\] fail_open_after_s = '{value}' "
        rf"\(AIRFLOW__GPU_SCHEDULER__FAIL_OPEN_AFTER_S\) {why}",
    ):
        config.get_float("fail_open_after_s")


def test_operator_arguments_override_the_config(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW__GPU_SCHEDULER__CLUSTER_VARIABLE", "from_config")
    monkeypatch.setenv("AIRFLOW_VAR_FROM_CONFIG", '{"gpu_types": {"h100": {"count": 2}}}')
    monkeypatch.setenv("AIRFLOW_VAR_FROM_ARGUMENT", '{"gpu_types": {"a100": {"count": 3}}}')
    assert [t.name for t in GpuScheduleOperator(task_id="p").load_cluster().gpu_types] == ["h100"]
    op = GpuScheduleOperator(task_id="q", cluster_variable="from_argument")
    assert [t.name for t in op.load_cluster().gpu_types] == ["a100"]
    assert GpuFailOpenOperator(task_id="w", fail_open_after_s=60).fail_open_after_s == 60.0
