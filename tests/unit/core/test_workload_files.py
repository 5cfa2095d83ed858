"""The jobs CSV and cluster JSON: each bad field is named with its line."""

import io
import json

import pytest

from airflow_gpu_scheduler.core.workload_files import WorkloadFileError, read_cluster, read_jobs, write_jobs

HEADER = "job_id,submit_s,kind,gpus,duration_s,estimate_s,priority,gpu_types,deadline_s,group,max_wait_s,team\n"
GOOD = "j1,0,training,8,3600,3000,5,h100|a100,,llm.train,,research\n"


def parse(text):
    handle = io.StringIO(text)
    handle.name = "jobs.csv"
    return read_jobs(handle)


def test_good_file_with_defaults_any_column_order_and_unknown_columns():
    jobs = parse("gpus,kind,job_id,duration_s,submit_s,extra\n1,quantization,q,60,5,x\n")
    (job,) = jobs
    assert (job.job_id, job.gpus, job.priority, job.gpu_types, job.estimate_s) == ("q", 1, 1.0, (), None)
    (job,) = parse(HEADER + GOOD)
    assert job.gpu_types == ("h100", "a100") and job.group == "llm.train" and job.estimate_s == 3000


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("j1,0,training,zero,3600,,,,,,\n", "gpus"),
        ("j1,0,training,1.5,3600,,,,,,\n", "gpus"),
        ("j1,0,training,0,3600,,,,,,\n", "gpus"),
        ("j1,0,finetune,1,3600,,,,,,\n", "kind"),
        ("j1,,training,1,3600,,,,,,\n", "submit_s"),
        ("j1,0,training,1,,,,,,,\n", "duration_s"),
        ("j1,0,training,1,-5,,,,,,\n", "duration_s"),
        ("j1,0,training,1,60,abc,,,,,\n", "estimate_s"),
        ("j1,0,training,1,60,,-1,,,,\n", "priority"),
        ("j1,100,training,1,60,,,,50,,\n", "deadline_s"),
        ("j1,0,realtime_inference,1,60,,,,,,-3\n", "max_wait_s"),
        (",0,training,1,60,,,,,,\n", "job_id"),
    ],
)
def test_each_bad_field_is_reported_with_line_and_field(row, field):
    with pytest.raises(WorkloadFileError) as info:
        parse(HEADER + GOOD.replace("j1", "ok") + row)
    assert info.value.line == 3 and info.value.field == field
    assert "jobs.csv, line 3" in str(info.value) and field in str(info.value)


def test_missing_column_and_duplicate_id():
    with pytest.raises(WorkloadFileError, match="field 'gpus'"):
        parse("job_id,submit_s,kind,duration_s\nj,0,training,5\n")
    with pytest.raises(WorkloadFileError, match="line 3.*duplicate"):
        parse(HEADER + GOOD + GOOD)


def test_round_trip(tmp_path):
    jobs = parse(HEADER + GOOD)
    write_jobs(jobs, tmp_path / "j.csv")
    assert read_jobs(tmp_path / "j.csv") == jobs


def test_cluster_file_errors(tmp_path):
    path = tmp_path / "c.json"
    path.write_text("{not json")
    with pytest.raises(WorkloadFileError, match="invalid JSON"):
        read_cluster(path)
    path.write_text(json.dumps({"gpu_types": {"h100": {"count": -1}}}))
    with pytest.raises(WorkloadFileError, match="count"):
        read_cluster(path)
    with pytest.raises(WorkloadFileError, match="cannot read"):
        read_cluster(tmp_path / "missing.json")
