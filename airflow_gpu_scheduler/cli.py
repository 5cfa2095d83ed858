"""``gpu-scheduler``: benchmark, replay, scale and demo commands.

``bench``, ``replay`` and ``scale`` only use the core (no Airflow import); ``demo``
starts an embedded Airflow and is imported lazily.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from airflow_gpu_scheduler.core.benchmark import ScenarioReport, run_benchmark, schedule_rows
from airflow_gpu_scheduler.core.policies import POLICY_NAMES
from airflow_gpu_scheduler.core.scenarios import SCENARIOS, Scenario, make_scenario
from airflow_gpu_scheduler.core.workload import split_valid
from airflow_gpu_scheduler.core.workload_files import WorkloadFileError, read_cluster, read_jobs, write_schedule


def _policies(value: str) -> list[str]:
    names = [p.strip() for p in value.split(",") if p.strip()]
    unknown = [p for p in names if p not in POLICY_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown policy {unknown}; choose from {','.join(POLICY_NAMES)}")
    return names


def _scenarios(value: str) -> list[str]:
    if value == "all":
        return list(SCENARIOS)
    names = [s.strip() for s in value.split(",") if s.strip()]
    unknown = [s for s in names if s not in SCENARIOS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown scenario {unknown}; choose from all,{','.join(SCENARIOS)}")
    return names


def _sizes(value: str) -> list[int]:
    try:
        sizes = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--jobs must be comma-separated integers, got {value!r}") from None
    if not sizes or min(sizes) <= 0:
        raise argparse.ArgumentTypeError(f"--jobs must be positive integers, got {value!r}")
    return sizes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpu-scheduler", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def outputs(p: argparse.ArgumentParser) -> None:
        p.add_argument("--policies", type=_policies, default=list(POLICY_NAMES), help="comma-separated")
        p.add_argument("--json", type=Path, help="write the results as JSON here")
        p.add_argument("--schedule", type=Path, help="write every job's outcome under every policy as CSV here")
        p.add_argument("--plots", type=Path, help="write PNG charts (utilization, Gantt) into this directory")
        p.add_argument("--no-bound", action="store_true", help="skip the upper-bound LP")

    bench = sub.add_parser("bench", help="run the seven scenarios side by side")
    bench.add_argument("--scenarios", type=_scenarios, default=list(SCENARIOS), help="all or comma-separated")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--quick", action="store_true", help="smaller scenarios, same shapes (CI)")
    outputs(bench)

    replay = sub.add_parser("replay", help="replay a workload file")
    replay.add_argument("--jobs", type=Path, required=True, help="jobs CSV")
    replay.add_argument("--cluster", type=Path, required=True, help="cluster JSON")
    replay.add_argument("--horizon-s", type=float, help="evaluation window (default: last submit + longest job)")
    outputs(replay)

    scale = sub.add_parser("scale", help="plan one cycle of growing queues: time, model size, gap to the LP bound")
    scale.add_argument("--jobs", type=_sizes, default=[100, 300, 1000, 3000, 5000], help="comma-separated sizes")
    scale.add_argument("--seed", type=int, default=0)
    scale.add_argument("--budget-s", type=float, default=10.0, help="the cycle's time budget (default 10 s)")
    scale.add_argument("--json", type=Path, help="write the rows as JSON here")
    scale.add_argument("--plots", type=Path, help="write scale.png (time and gap against queue size) here")

    demo = sub.add_parser("demo", help="start an embedded Airflow with the provider and run a workload",
                          description="Start an embedded Airflow (SQLite, LocalExecutor) with the provider, run the "
                                      "same GPU workload with Airflow alone and with the plan, and print what ran.")
    demo.add_argument("--home", type=Path, default=Path(".airflow-demo"),
                      help="AIRFLOW_HOME of the demo, wiped at start (default: .airflow-demo)")
    demo.add_argument("--port", type=_port, default=8080, help="UI/API port; a free one if taken (default: 8080)")
    demo.add_argument("--exit", action="store_true", help="stop Airflow after printing the summary")
    return parser


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--port must be an integer, got {value!r}") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"--port must be between 1 and 65535, got {port}")
    return port


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from airflow_gpu_scheduler import demo

        return demo.run(args.home, args.port, args.exit)
    if args.command == "scale":
        return _scale(args)
    try:
        if args.command == "bench":
            scenarios = [make_scenario(name, seed=args.seed, quick=args.quick) for name in args.scenarios]
        else:
            scenarios = [_replay_scenario(args)]
    except WorkloadFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    reports = _run_with_progress(scenarios, args.policies, not args.no_bound)
    elapsed = time.perf_counter() - started
    print_table(reports, args.policies)
    print(f"\n{len(scenarios)} scenario(s) x {len(args.policies)} policies in {elapsed:.0f} s")
    if args.json:
        data = {"scenarios": {r.scenario.name: r.as_dict() for r in reports}, "elapsed_s": round(elapsed, 1)}
        args.json.write_text(json.dumps(data, indent=2))
        print(f"JSON: {args.json}")
    if args.schedule:
        write_schedule(schedule_rows(reports), args.schedule)
        print(f"schedule: {args.schedule}")
    if args.plots:
        from airflow_gpu_scheduler.core.plots import write_plots

        for path in write_plots(reports, args.plots):
            print(f"plot: {path}")
    return 0


def _scale(args: argparse.Namespace) -> int:
    from airflow_gpu_scheduler.core.planner import PlannerConfig
    from airflow_gpu_scheduler.core.scale import measure_sizes, write_scale_plot

    config = PlannerConfig(time_limit_s=args.budget_s)
    header = (f"{'jobs':>6} {'GPUs':>5} {'method':>13} {'vars':>7} {'cons':>6} {'nnz':>8} {'subs':>5} "
              f"{'build':>6} {'handoff':>7} {'solve':>6} {'wall':>6} {'vs greedy':>9} {'vs LP':>7} "
              f"{'full vars':>9} {'LP s':>6} {'peak MB':>7}")
    print(f"one planning cycle per size, budget {args.budget_s:g} s (sizes: largest sub-MILP; times in s)")
    print(header)

    def show(r) -> None:
        gap = f"{r.gap_to_lp_pct:6.2f}%" if r.gap_to_lp_pct is not None else "    n/a"
        print(f"{r.jobs:>6} {r.gpus:>5} {r.method:>13} {r.variables:>7} {r.constraints:>6} {r.nonzeros:>8} "
              f"{r.subproblems:>5} {r.build_s:>6.2f} {r.handoff_s:>7.2f} {r.solve_s:>6.2f} {r.wall_s:>6.2f} "
              f"{r.vs_greedy_pct:>+8.2f}% {gap} {r.full_variables:>9} {r.lp_bound_s:>6.1f} {r.peak_rss_mb:>7.0f}",
              flush=True)

    rows = measure_sizes(args.jobs, args.seed, config, on_done=show)
    if args.json:
        args.json.write_text(json.dumps({"budget_s": args.budget_s, "seed": args.seed,
                                         "rows": [r.to_dict() for r in rows]}, indent=2))
        print(f"JSON: {args.json}")
    if args.plots:
        for path in write_scale_plot(rows, args.plots):
            print(f"plot: {path}")
    worse = [r.jobs for r in rows if r.objective < r.greedy_objective - 1e-6]
    if worse:
        print(f"error: plan worse than greedy at {worse}", file=sys.stderr)
        return 1
    return 0


def _replay_scenario(args: argparse.Namespace) -> Scenario:
    cluster = read_cluster(args.cluster)
    jobs, errors = split_valid(read_jobs(args.jobs), cluster)
    for error in errors:
        print(f"rejected: {args.jobs}: {error}", file=sys.stderr)
    if not jobs:
        raise WorkloadFileError(str(args.jobs), None, None, "no valid job to replay")
    horizon = args.horizon_s or max(j.submit_s for j in jobs) + max(j.duration_s or 0.0 for j in jobs)
    return Scenario("replay", f"replay of {args.jobs}", cluster, tuple(jobs), horizon)


def _run_with_progress(scenarios: list[Scenario], policies: list[str], with_bound: bool) -> list[ScenarioReport]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    total = len(scenarios) * (len(policies) + int(with_bound))
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True) as progress:
        task = progress.add_task("simulating", total=total)

        def done(label: str) -> None:
            progress.update(task, advance=1, description=f"done: {label}")

        return run_benchmark(scenarios, policies, with_bound=with_bound, on_done=done)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(reports: Sequence[ScenarioReport], policies: Sequence[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="GPU scheduling policies, same cluster and workload (window [0, horizon])")
    for col in ("scenario", "policy", "util", "weighted out", "vs fifo", "vs best other", "% of bound",
                "stream p95 wait s", "deadline hit", "max wait h", "plan p95 s"):
        table.add_column(col, justify="left" if col in ("scenario", "policy") else "right")
    for report in reports:
        fifo = report.metrics.get("fifo")
        best = report.best_other()
        for i, (name, m) in enumerate(report.metrics.items()):
            vs_fifo = vs_best = ""
            if name == "milp" and fifo is not None:
                vs_fifo = (f"{(m.utilization - fifo.utilization) * 100:+.1f} pt / "
                           f"{_pct(m.weighted_output, fifo.weighted_output)}")
            if name == "milp" and best is not None:
                vs_best = (f"{best[0]}: {(m.utilization - best[1].utilization) * 100:+.1f} pt / "
                           f"{_pct(m.weighted_output, best[1].weighted_output)}")
            of_bound = (f"{m.weighted_output / report.upper_bound * 100:.1f}%" if report.upper_bound else "-")
            table.add_row(
                report.scenario.name if i == 0 else "", name, f"{m.utilization:.3f}",
                f"{m.weighted_output:,.0f}", vs_fifo, vs_best, of_bound,
                _fmt(m.streaming_p95_wait_s, ".0f"), _fmt(m.deadline_hit_rate, ".2f"),
                _fmt(None if m.max_wait_s is None else m.max_wait_s / 3600, ".1f"), _fmt(m.plan_p95_s, ".2f"),
            )
        closing = ""
        if report.upper_bound and best is not None and "milp" in report.metrics:
            room = report.upper_bound - best[1].weighted_output
            gained = report.metrics["milp"].weighted_output - best[1].weighted_output
            closing = f"closes {gained / room * 100:.0f}% of best->bound" if room > 0 else "best already at bound"
        sc = report.scenario
        table.add_row("", f"[dim]{len(sc.jobs)} jobs, {sc.cluster.total_gpus} GPUs, load {sc.offered_load:.2f}, "
                          f"bound {_fmt(report.upper_bound, ',.0f')}; {closing}[/dim]", *[""] * 9,
                      end_section=True)
    Console(width=200).print(table)


def _pct(ours: float, theirs: float) -> str:
    if theirs <= 0:
        return "n/a" if ours <= 0 else "+inf%"
    return f"{(ours / theirs - 1) * 100:+.1f}%"


if __name__ == "__main__":
    raise SystemExit(main())
