"""PNG charts of benchmark results: busy GPUs over time, and a Gantt chart per policy."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from airflow_gpu_scheduler.core.benchmark import ScenarioReport

#: matplotlib is an optional dependency (with its own dependencies it is large): the ``plots`` extra.
MISSING_MATPLOTLIB = (
    "--plots needs matplotlib, which is not installed; install the plots extra: "
    "pip install 'airflow-gpu-scheduler[plots]'"
)


def matplotlib_missing() -> str | None:
    """Why PNG charts cannot be drawn here (the install command to fix it), or ``None`` if they can."""
    return MISSING_MATPLOTLIB if importlib.util.find_spec("matplotlib") is None else None


KIND_COLORS = {
    "training": "#4C72B0",
    "realtime_inference": "#DD8452",
    "batch_inference": "#55A868",
    "quantization": "#8172B3",
}


def busy_profile(report: ScenarioReport, policy: str) -> tuple[list[float], list[int]]:
    """Step function of busy GPUs over the window (hours, GPUs)."""
    horizon = report.scenario.horizon_s
    jobs = {j.job_id: j for j in report.scenario.jobs}
    deltas: dict[float, int] = {0.0: 0}
    for o in report.outcomes[policy].values():
        if o.start_s is None:
            continue
        end = min(o.end_s if o.end_s is not None else horizon, horizon)
        deltas[o.start_s] = deltas.get(o.start_s, 0) + jobs[o.job_id].gpus
        deltas[end] = deltas.get(end, 0) - jobs[o.job_id].gpus
    xs, ys, level = [], [], 0
    for t in sorted(deltas):
        level += deltas[t]
        xs.append(t / 3600)
        ys.append(level)
    return xs, ys


def write_plots(reports: Sequence[ScenarioReport], directory: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for report in reports:
        sc = report.scenario
        policies = list(report.outcomes)
        fig, ax = plt.subplots(figsize=(11, 4))
        for policy in policies:
            xs, ys = busy_profile(report, policy)
            ax.step(xs, ys, where="post", label=f"{policy} (util {report.metrics[policy].utilization:.2f})")
        ax.axhline(sc.cluster.total_gpus, color="black", linewidth=0.8, linestyle=":")
        ax.set(
            xlabel="hours",
            ylabel="busy GPUs",
            title=f"{sc.name}: busy GPUs over time",
            xlim=(0, sc.horizon_s / 3600),
            ylim=(0, sc.cluster.total_gpus * 1.05),
        )
        ax.legend(loc="lower right", fontsize=8)
        path = directory / f"{sc.name}-utilization.png"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

        fig, axes = plt.subplots(len(policies), 1, figsize=(12, 2.6 * len(policies)), sharex=True, squeeze=False)
        jobs = {j.job_id: j for j in sc.jobs}
        offsets, total = {}, 0
        for t in sc.cluster.gpu_types:
            offsets[t.name] = total
            total += t.count
        for ax, policy in zip(axes[:, 0], policies, strict=False):
            # Give each job concrete GPU indices within its type (first free), so gangs show as blocks.
            free_at = {t.name: [0.0] * t.count for t in sc.cluster.gpu_types}
            outcomes = sorted(
                (o for o in report.outcomes[policy].values() if o.start_s is not None),
                key=lambda o: cast(float, o.start_s),
            )
            for o in outcomes:
                start, gpu_type = o.start_s, o.gpu_type
                if start is None or gpu_type is None:  # never: filtered above, and a started job has a type
                    continue
                job = jobs[o.job_id]
                end = o.end_s if o.end_s is not None else sc.horizon_s
                lanes = free_at[gpu_type]
                chosen = [i for i, t in enumerate(lanes) if t <= start + 1e-6][: job.gpus]
                for i in chosen:
                    lanes[i] = end
                    ax.broken_barh(
                        [(start / 3600, (end - start) / 3600)],
                        (offsets[gpu_type] + i, 0.9),
                        facecolors=KIND_COLORS[job.kind.value],
                    )
            for name, off in offsets.items():
                ax.axhline(off, color="grey", linewidth=0.5)
                ax.text(0, off + 0.5, name, fontsize=7, va="bottom")
            ax.set(ylim=(0, total), ylabel=policy, xlim=(0, sc.horizon_s / 3600))
            ax.set_yticks([])
        axes[-1, 0].set_xlabel("hours")
        axes[0, 0].legend(
            handles=[Patch(color=c, label=k) for k, c in KIND_COLORS.items()], loc="upper right", fontsize=7, ncol=4
        )
        fig.suptitle(f"{sc.name}: which GPU ran what, per policy")
        path = directory / f"{sc.name}-gantt.png"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
