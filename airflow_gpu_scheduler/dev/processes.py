"""Processes of the embedded Airflow: free ports, Celery worker names, and stopping whole sessions."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path

#: Environment variable naming a Celery worker started here; see :func:`worker_hostname`.
WORKER_HOSTNAME_ENV = "GPU_SCHEDULER_WORKER_HOSTNAME"


def worker_hostname() -> str:
    """``[core] hostname_callable`` of embedded Celery workers: the worker's own name.

    Workers on one machine share its hostname, so the task instance's ``hostname`` column
    could not tell them apart; each embedded worker names itself instead (on real GPU nodes
    the machine's hostname already does).
    """
    return os.environ.get(WORKER_HOSTNAME_ENV) or socket.getfqdn()


def session_members(sessions: set[int]) -> list[int]:
    """Live processes in any of these sessions (Linux ``/proc``; elsewhere none are found)."""
    members = []
    proc = Path("/proc")
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) not in sessions:
                continue
            # The state follows the command name in parentheses; a zombie only waits to be reaped.
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                members.append(int(entry.name))
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to read
    return members


def stop_sessions(sessions: set[int], timeout_s: float = 10.0) -> None:
    """SIGTERM every process left in these sessions, then SIGKILL what still runs after ``timeout_s``."""
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        members = session_members(sessions)
        if not members:
            return
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while session_members(sessions) and time.monotonic() < deadline:
            time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
