"""Workload files: jobs CSV and cluster JSON in, per-job schedule CSV out.

Jobs CSV: a header, columns in any order, unknown columns ignored::

    job_id, submit_s, kind, gpus, duration_s, estimate_s, priority, gpu_types, deadline_s, group, max_wait_s

``estimate_s`` empty: estimated from history; ``gpu_types`` empty: any type, several
separated by ``|``; ``priority`` empty: 1; ``deadline_s`` / ``max_wait_s`` empty: none
/ the real-time default. Every bad row is reported with its line and field.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from airflow_gpu_scheduler.core.workload import Cluster, Job, JobKind, WorkloadError

REQUIRED_COLUMNS = ("job_id", "submit_s", "kind", "gpus", "duration_s")
OPTIONAL_COLUMNS = ("estimate_s", "priority", "gpu_types", "deadline_s", "group", "max_wait_s")
SCHEDULE_COLUMNS = ("policy", "job_id", "gpu_type", "submit_s", "start_s", "end_s", "scenario", "seed")


class WorkloadFileError(ValueError):
    """A workload file is malformed; names the file, line and field."""

    def __init__(self, path: str, line: int | None, field: str | None, reason: str) -> None:
        where = f"{path}" + (f", line {line}" if line is not None else "") + (f", field '{field}'" if field else "")
        super().__init__(f"{where}: {reason}")
        self.path, self.line, self.field, self.reason = path, line, field, reason


def _float(value: str, path: str, line: int, field: str, required: bool) -> float | None:
    value = value.strip()
    if not value:
        if required:
            raise WorkloadFileError(path, line, field, "is required but empty")
        return None
    try:
        return float(value)
    except ValueError:
        raise WorkloadFileError(path, line, field, f"expected a number, got {value!r}") from None


def _int(value: str, path: str, line: int, field: str) -> int:
    number = _float(value, path, line, field, required=True)
    assert number is not None
    if not number.is_integer():
        raise WorkloadFileError(path, line, field, f"expected a whole number, got {value.strip()!r}")
    return int(number)


def parse_job_row(row: Mapping[str, str], path: str, line: int) -> Job:
    """One CSV row to a :class:`Job`; every problem names the line and the field."""

    def get(name: str) -> str:
        return (row.get(name) or "").strip()

    try:
        kind = JobKind.parse(get("kind"))
    except WorkloadError as error:
        raise WorkloadFileError(path, line, "kind", error.reason) from None
    types = tuple(t.strip() for t in get("gpu_types").split("|") if t.strip())
    priority = _float(get("priority"), path, line, "priority", required=False)
    try:
        return Job(
            job_id=get("job_id"),
            submit_s=_float(get("submit_s"), path, line, "submit_s", required=True) or 0.0,
            kind=kind,
            gpus=_int(get("gpus"), path, line, "gpus"),
            duration_s=_float(get("duration_s"), path, line, "duration_s", required=True),
            estimate_s=_float(get("estimate_s"), path, line, "estimate_s", required=False),
            priority=1.0 if priority is None else priority,
            gpu_types=types,
            deadline_s=_float(get("deadline_s"), path, line, "deadline_s", required=False),
            group=get("group") or None,
            max_wait_s=_float(get("max_wait_s"), path, line, "max_wait_s", required=False),
        )
    except WorkloadError as error:
        raise WorkloadFileError(path, line, error.field, error.reason) from None


def read_jobs(source: str | Path | IO[str]) -> list[Job]:
    """Read a jobs CSV; raises :class:`WorkloadFileError` at the first bad line."""
    if isinstance(source, (str, Path)):
        path = str(source)
        try:
            with open(source, newline="", encoding="utf-8") as handle:
                return _read_jobs(handle, path)
        except OSError as error:
            raise WorkloadFileError(path, None, None, f"cannot read: {error.strerror}") from None
    return _read_jobs(source, getattr(source, "name", "<jobs>"))


def _read_jobs(handle: IO[str], path: str) -> list[Job]:
    reader = csv.DictReader(handle)
    header = [h.strip() for h in (reader.fieldnames or [])]
    reader.fieldnames = header
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise WorkloadFileError(path, 1, missing[0], f"required column missing (header: {header})")
    jobs: list[Job] = []
    seen: dict[str, int] = {}
    for row in reader:
        line = reader.line_num
        job = parse_job_row(row, path, line)
        if job.job_id in seen:
            raise WorkloadFileError(
                path, line, "job_id", f"duplicate job id {job.job_id!r} (first on line {seen[job.job_id]})"
            )
        seen[job.job_id] = line
        jobs.append(job)
    return jobs


def write_jobs(jobs: Iterable[Job], path: str | Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(REQUIRED_COLUMNS + OPTIONAL_COLUMNS)
        for j in jobs:
            writer.writerow(
                [
                    j.job_id,
                    j.submit_s,
                    j.kind.value,
                    j.gpus,
                    j.duration_s,
                    _blank(j.estimate_s),
                    j.priority,
                    "|".join(j.gpu_types),
                    _blank(j.deadline_s),
                    j.group or "",
                    _blank(j.max_wait_s),
                ]
            )


def read_cluster(path: str | Path) -> Cluster:
    try:
        with open(path, encoding="utf-8") as handle:
            data: Any = json.load(handle)
    except OSError as error:
        raise WorkloadFileError(str(path), None, None, f"cannot read: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise WorkloadFileError(str(path), error.lineno, None, f"invalid JSON: {error.msg}") from None
    try:
        return Cluster.from_dict(data)
    except WorkloadError as error:
        raise WorkloadFileError(str(path), None, error.field, f"{error.subject}: {error.reason}") from None


def _blank(value: float | None) -> str:
    return "" if value is None else repr(value)


def write_schedule(
    rows: Iterable[tuple[str, str, str | None, float, float | None, float | None, str, int | None]], path: str | Path
) -> None:
    """Every job's outcome under every policy, so anyone can recompute the metrics.

    Columns: policy, job_id, gpu_type, submit_s, start_s (empty: never started), end_s
    (empty: not finished by the horizon), scenario, seed (empty: a replay without seeds).
    """
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(SCHEDULE_COLUMNS)
        for policy, job_id, gpu_type, submit, start, end, scenario, seed in rows:
            writer.writerow(
                [policy, job_id, gpu_type or "", submit, _blank(start), _blank(end), scenario, _blank(seed)]
            )
