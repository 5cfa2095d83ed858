"""The wheel and sdist built once per test session, and virtualenvs made once and reused across runs.

Installing Airflow into a fresh virtualenv takes a minute or two, so each virtualenv is kept in
``~/.cache/airflow-gpu-scheduler/venvs`` under a key of what was installed into it (Python, the
package's declared dependencies, the Airflow pin): a re-run with the same key only reinstalls this
package's wheel (seconds). A new key makes a new virtualenv and removes the old one. A lock file
serializes test runs (several checkouts on one machine) that use the same virtualenv.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (README: 3.10+); the test group installs tomli there
    import tomli as tomllib

ROOT = Path(__file__).parents[2]
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "airflow-gpu-scheduler" / "venvs"


def run(args: list[str | Path], timeout: float = 900, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=timeout, check=False, **kwargs
    )
    if done.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, args))} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done


def build_distributions(outdir: Path) -> tuple[Path, Path]:
    """``python -m build``: the sdist, then the wheel built from that sdist (so the sdist is complete).

    The build's output is kept in ``outdir/build.log`` for the tests that read its warnings.
    """
    done = run([sys.executable, "-m", "build", "--outdir", outdir, ROOT], timeout=600)
    (outdir / "build.log").write_text(done.stdout + done.stderr)
    (wheel,) = outdir.glob("*.whl")
    (sdist,) = outdir.glob("*.tar.gz")
    return wheel, sdist


def _key(requirements: list[str]) -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    parts = [sys.version_info[:2], project["dependencies"], project.get("optional-dependencies", {}), requirements]
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


@contextlib.contextmanager
def cached_venv(name: str, wheel: Path, requirements: list[str] = ()) -> Iterator[Path]:
    """A virtualenv with ``wheel`` (and its dependencies, resolved fresh the first time) plus ``requirements``.

    Yields the virtualenv's ``bin`` folder, holding the lock while the caller uses it.
    """
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        root = CACHE / f"{name}-{_key(list(requirements))}"
        if not (root / ".ready").exists():
            for stale in CACHE.glob(f"{name}-*"):
                if stale.is_dir():
                    shutil.rmtree(stale, ignore_errors=True)
            run([sys.executable, "-m", "venv", root])
            run([root / "bin" / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
            run([root / "bin" / "python", "-m", "pip", "install", "--quiet", wheel, *requirements], timeout=1800)
            (root / ".ready").touch()
        else:
            # Same dependencies: only this package changed.
            run([root / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", wheel])
        yield root / "bin"


def installed(bin_dir: Path) -> dict[str, str]:
    """``{distribution: version}`` in a virtualenv."""
    out = run([bin_dir / "python", "-m", "pip", "list", "--format", "json"]).stdout
    return {d["name"].lower(): d["version"] for d in json.loads(out)}


def clean_env(bin_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a fresh shell using ``bin_dir`` first, without this process's Airflow settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = str(bin_dir) + os.pathsep + env.get("PATH", "")
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    env.update(extra)
    return env
