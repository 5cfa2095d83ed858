"""The headline Markdown table, from hand-made runs: each cell says what its header says."""

from dataclasses import replace

from airflow_gpu_scheduler.core.benchmark import ScenarioReport, summarize
from airflow_gpu_scheduler.core.metrics import PolicyMetrics
from airflow_gpu_scheduler.core.report import markdown
from airflow_gpu_scheduler.core.scenarios import make_scenario

BASE = PolicyMetrics(
    utilization=0.8,
    weighted_output=1e6,
    weighted_goodput=1e6,
    streaming_p95_wait_s=100.0,
    streaming_on_time_rate=0.9,
    deadline_hit_rate=None,
    mean_wait_s={},
    max_wait_s=3600.0,
    plan_p95_s=None,
    jobs_started=10,
    jobs_completed=10,
)


def test_markdown_reports_streaming_waits_and_service_level_for_airflow_and_milp():
    runs = []
    for seed, (milp_p95, milp_on_time) in enumerate([(300.0, 0.95), (500.0, 0.85)]):
        report = ScenarioReport(make_scenario("steady_mix", seed=seed, quick=True))
        report.metrics = {
            "fifo": replace(BASE, weighted_goodput=0.5e6),
            "airflow": BASE,
            "milp": replace(
                BASE,
                weighted_goodput=1.1e6,
                streaming_p95_wait_s=milp_p95,
                streaming_on_time_rate=milp_on_time,
                plan_p95_s=0.5 + seed,
            ),
        }
        runs.append(report)
    header, _, row = markdown(summarize(runs)).splitlines()
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")], strict=True))
    assert cells["stream p95 s (airflow / milp)"] == "100 / 400"  # means over the seeds
    assert cells["stream on time (airflow / milp)"] == "90% / 90%"
    assert cells["milp vs best other: mean / wins / worst"] == "airflow: +10.0 % / 2 of 2 / +10.0 %"
    assert cells["milp plan p95 s (max)"] == "1.50"
