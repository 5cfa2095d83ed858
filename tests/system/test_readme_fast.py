"""The README's fast test command works as written: it runs the unit tests and passes."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readmes_fast_test_command_runs_the_unit_tests():
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"`(\./scripts/test\.sh --fast)`", readme)
    assert command, "README.md no longer gives ./scripts/test.sh --fast"
    done = subprocess.run(command.group(1), shell=True, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = re.search(r"(\d+) passed", done.stdout)
    assert summary and int(summary.group(1)) > 100, done.stdout[-2000:]
    assert "failed" not in done.stdout.splitlines()[-1]
