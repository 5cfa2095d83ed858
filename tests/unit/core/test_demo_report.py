"""The demo's report without Airflow: scoring recorded runs with the benchmark's metrics, and the reasons it gives."""

from __future__ import annotations

import pytest

from airflow_gpu_scheduler import demo_report as report
from airflow_gpu_scheduler import demo_workload as workload
from airflow_gpu_scheduler.core.metrics import evaluate


def as_records(run: report.RunScore) -> list[report.Record]:
    return [report.Record(o.job_id, o.submit_s, o.start_s, o.end_s) for o in run.result.outcomes.values()]


@pytest.fixture(scope="module")
def forecast():
    return report.forecast()


def test_recorded_runs_are_scored_like_the_benchmark(forecast):
    sim_airflow, _ = forecast
    again = report.score("measured", as_records(sim_airflow))
    expected = evaluate(sim_airflow.result)
    assert again.metrics.as_dict() == {**expected.as_dict(), "plan_p95_s": None}  # a real run has no simulated planner


def test_what_happens_after_the_window_earns_nothing():
    records = [report.Record(a.name, a.at_s, a.at_s, a.at_s + a.seconds) for a in workload.ARRIVALS]
    late = [
        r if r.name != "finetune" else report.Record(r.name, r.submit_s, workload.WINDOW_S - 10, workload.WINDOW_S + 40)
        for r in records
    ]
    on_time, cut = report.score("a", records), report.score("b", late)
    gang = next(a for a in workload.ARRIVALS if a.name == "finetune")
    spec = workload.KINDS[gang.kind]
    assert on_time.metrics.weighted_output - cut.metrics.weighted_output == pytest.approx(
        spec.priority * spec.gpus * gang.seconds
    )
    assert cut.outcome("finetune").end_s is None and cut.wait_s("finetune") == pytest.approx(workload.WINDOW_S - 10 - 8)


def test_the_forecast_shows_the_gang_starved_by_airflow_and_started_by_the_plan(forecast):
    sim_airflow, sim_milp = forecast
    assert sim_milp.wait_s("finetune") < sim_airflow.wait_s("finetune")
    assert sim_milp.metrics.weighted_output > sim_airflow.metrics.weighted_output


def test_every_line_that_favours_airflow_alone_gets_a_reason(forecast):
    sim_airflow, sim_milp = forecast
    # A measured planned run in which the gang and the endpoint start much later than forecast.
    delay = {"finetune": 100.0, "endpoint": 30.0}
    slow = [
        report.Record(r.name, r.submit_s, r.start_s + delay[r.name], r.end_s + delay[r.name]) if r.name in delay else r
        for r in as_records(sim_milp)
    ]
    planned = report.score("planned", slow)
    trace = report.PlanTrace(
        created_s=(10.0, 15.0, 21.0),
        streaming_slots=((10.0, 0), (80.0, 1)),
        reasons={"endpoint": ((80.0, "all 6 h100 GPUs are busy until 12:00:00 UTC"),)},
        released_s={"endpoint": 100.0},
    )
    rows = report.lines(sim_airflow, planned, sim_airflow, sim_milp)
    reasons = report.why_alone_is_ahead(sim_airflow, planned, trace, rows)
    favoured = [row.label.split()[0] for row in rows if row.favours_alone]
    assert [reason.split()[0].rstrip(":") for reason in reasons] == favoured
    assert "training" in favoured and "real-time" in favoured
    rt = next(reason for reason in reasons if reason.startswith("real-time"))
    assert "all 6 h100 GPUs are busy" in rt and "released" in rt


def test_idle_time_while_work_waits_is_split_by_cause():
    # One 1-GPU job waits 10 s on an empty cluster while the plan reserves one GPU for streaming.
    records = [report.Record(a.name, 0.0, None, None) for a in workload.ARRIVALS]
    records = [report.Record(r.name, 1000.0, None, None) for r in records if r.name != "quantize_00"]
    records.append(report.Record("quantize_00", 0.0, 10.0, 30.0))
    run = report.score("x", records, window_s=40.0)
    idle = report.idle_time(run, report.PlanTrace(streaming_slots=((0.0, 1),)))
    assert idle.gang == 0
    assert idle.reserved == pytest.approx(10.0)
    assert idle.other == pytest.approx((workload.GPUS - 1) * 10.0)


def test_the_table_prints_what_decides_which_run_a_line_favours(forecast):
    sim_airflow, sim_milp = forecast
    rows = report.lines(sim_airflow, sim_milp, sim_airflow, sim_milp)
    text = report.table(rows)
    assert len(text) == 2 + len(rows)
    for row, line in zip(rows, text[2:], strict=True):
        assert line.startswith(row.label) and all(cell in line for cell in row.cells)
        assert not row.favours_alone or row.values[0] != row.values[1]
