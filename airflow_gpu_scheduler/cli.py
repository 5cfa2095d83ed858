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

from airflow_gpu_scheduler.core.benchmark import ScenarioReport, run_benchmark, schedule_rows, summarize
from airflow_gpu_scheduler.core.policies import BENCHMARK_POLICIES
from airflow_gpu_scheduler.core.report import markdown, print_summary
from airflow_gpu_scheduler.core.scenarios import SCENARIOS, Scenario, make_scenario, with_sampled_estimates
from airflow_gpu_scheduler.core.workload import split_valid
from airflow_gpu_scheduler.core.workload_files import WorkloadFileError, read_cluster, read_jobs, write_schedule


def _policies(value: str) -> list[str]:
    names = [p.strip() for p in value.split(",") if p.strip()]
    unknown = [p for p in names if p not in BENCHMARK_POLICIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown policy {unknown}; choose from {','.join(BENCHMARK_POLICIES)}")
    return names


def _scenarios(value: str) -> list[str]:
    if value == "all":
        return list(SCENARIOS)
    names = [s.strip() for s in value.split(",") if s.strip()]
    unknown = [s for s in names if s not in SCENARIOS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown scenario {unknown}; choose from all,{','.join(SCENARIOS)}")
    return names


def _seeds(value: str) -> list[int]:
    """``0-4``, ``0,3,7`` or ``0-4,100-102`` -> seeds in the order given, each once."""
    seeds: list[int] = []
    try:
        for part in (p.strip() for p in value.split(",")):
            if not part:
                continue
            lo, _, hi = part.partition("-")
            first, last = int(lo), int(hi) if hi else int(lo)
            if first < 0 or last < first:
                raise ValueError
            seeds += [s for s in range(first, last + 1) if s not in seeds]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds must look like 0-4 or 0,3,7 (non-negative), got {value!r}") from None
    if not seeds:
        raise argparse.ArgumentTypeError(f"--seeds names no seed: {value!r}")
    return seeds


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
        p.add_argument(
            "--policies",
            type=_policies,
            default=list(BENCHMARK_POLICIES),
            help="comma-separated (default: all; clairvoyant is a yardstick that knows the future)",
        )
        p.add_argument("--json", type=Path, help="write the results as JSON here")
        p.add_argument("--schedule", type=Path, help="write every job's outcome under every policy as CSV here")
        p.add_argument("--plots", type=Path, help="write PNG charts (utilization, Gantt) into this directory")
        p.add_argument("--no-bound", action="store_true", help="skip the upper-bound LP")
        p.add_argument("--markdown", type=Path, help="write the summary as a Markdown table here")

    bench = sub.add_parser("bench", help="run the seven scenarios side by side")
    bench.add_argument("--scenarios", type=_scenarios, default=list(SCENARIOS), help="all or comma-separated")
    seeds = bench.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=int, help="one seed (default 0)")
    seeds.add_argument("--seeds", type=_seeds, help="several seeds, run in parallel processes: 0-4 or 0,3,7")
    bench.add_argument("--quick", action="store_true", help="smaller scenarios, same shapes (CI)")
    outputs(bench)

    replay = sub.add_parser("replay", help="replay a workload file")
    replay.add_argument("--jobs", type=Path, required=True, help="jobs CSV")
    replay.add_argument("--cluster", type=Path, required=True, help="cluster JSON")
    replay.add_argument("--horizon-s", type=float, help="evaluation window (default: last submit + longest job)")
    replay.add_argument(
        "--seeds",
        type=_seeds,
        help="re-sample the estimate errors (~20 %% log-normal) of jobs whose "
        "file gives no estimate_s, once per seed; the file's own estimates are kept",
    )
    outputs(replay)

    scale = sub.add_parser("scale", help="plan one cycle of growing queues: time, model size, gap to the LP bound")
    scale.add_argument("--jobs", type=_sizes, default=[100, 300, 1000, 3000, 5000], help="comma-separated sizes")
    scale.add_argument("--seed", type=int, default=0)
    scale.add_argument("--budget-s", type=float, default=10.0, help="the cycle's time budget (default 10 s)")
    scale.add_argument("--json", type=Path, help="write the rows as JSON here")
    scale.add_argument("--plots", type=Path, help="write scale.png (time and gap against queue size) here")

    demo = sub.add_parser(
        "demo",
        help="start an embedded Airflow with the provider and run a workload",
        description="Start an embedded Airflow (SQLite, LocalExecutor) with the provider, run the "
        "same GPU workload with Airflow alone and with the plan, and print what ran.",
    )
    demo.add_argument(
        "--home",
        type=Path,
        default=Path(".airflow-demo"),
        help="AIRFLOW_HOME of the demo, wiped at start (default: .airflow-demo)",
    )
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
    if getattr(args, "plots", None):
        from airflow_gpu_scheduler.core.plots import matplotlib_missing

        if missing := matplotlib_missing():  # say so before minutes of benchmarking, not after
            print(f"error: {missing}", file=sys.stderr)
            return 2
    if args.command == "demo":
        from airflow_gpu_scheduler.dev import demo

        return demo.run(args.home, args.port, args.exit)
    if args.command == "scale":
        return _scale(args)
    try:
        if args.command == "bench":
            seeds = args.seeds or [args.seed if args.seed is not None else 0]
            scenarios = [make_scenario(name, seed=seed, quick=args.quick) for name in args.scenarios for seed in seeds]
        else:
            scenarios = _replay_scenarios(args)
    except WorkloadFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    reports = _run_with_progress(scenarios, args.policies, not args.no_bound)
    elapsed = time.perf_counter() - started
    summaries = summarize(reports)
    print_summary(summaries)
    print(f"\n{len(scenarios)} scenario run(s) x {len(args.policies)} policies in {elapsed:.0f} s")
    if args.json:
        data = {
            "summary": {s.name: s.as_dict() for s in summaries},
            "runs": [{"scenario": r.scenario.name, **r.as_dict()} for r in reports],
            "elapsed_s": round(elapsed, 1),
        }
        args.json.write_text(json.dumps(data, indent=2))
        print(f"JSON: {args.json}")
    if args.markdown:
        args.markdown.write_text(markdown(summaries))
        print(f"Markdown: {args.markdown}")
    if args.schedule:
        write_schedule(schedule_rows(reports), args.schedule)
        print(f"schedule: {args.schedule}")
    if args.plots:
        from airflow_gpu_scheduler.core.plots import write_plots

        # Charts of the first seed only: one utilization curve and Gantt per scenario stay readable.
        first = [r for r in reports if r.scenario.seed == reports[0].scenario.seed]
        for path in write_plots(first, args.plots):
            print(f"plot: {path}")
    return 0


def _scale(args: argparse.Namespace) -> int:
    from airflow_gpu_scheduler.core.planner import PlannerConfig
    from airflow_gpu_scheduler.core.scale import measure_sizes, write_scale_plot

    config = PlannerConfig(time_limit_s=args.budget_s)
    header = (
        f"{'jobs':>6} {'GPUs':>5} {'method':>13} {'vars':>7} {'cons':>6} {'nnz':>8} {'subs':>5} "
        f"{'build':>6} {'handoff':>7} {'solve':>6} {'wall':>6} {'vs greedy':>9} {'vs LP':>7} "
        f"{'full vars':>9} {'LP s':>6} {'peak MB':>7}"
    )
    print(f"one planning cycle per size, budget {args.budget_s:g} s (sizes: largest sub-MILP; times in s)")
    print(header)

    def show(r) -> None:
        gap = f"{r.gap_to_lp_pct:6.2f}%" if r.gap_to_lp_pct is not None else "    n/a"
        print(
            f"{r.jobs:>6} {r.gpus:>5} {r.method:>13} {r.variables:>7} {r.constraints:>6} {r.nonzeros:>8} "
            f"{r.subproblems:>5} {r.build_s:>6.2f} {r.handoff_s:>7.2f} {r.solve_s:>6.2f} {r.wall_s:>6.2f} "
            f"{r.vs_greedy_pct:>+8.2f}% {gap} {r.full_variables:>9} {r.lp_bound_s:>6.1f} {r.peak_rss_mb:>7.0f}",
            flush=True,
        )

    rows = measure_sizes(args.jobs, args.seed, config, on_done=show)
    if args.json:
        args.json.write_text(
            json.dumps({"budget_s": args.budget_s, "seed": args.seed, "rows": [r.to_dict() for r in rows]}, indent=2)
        )
        print(f"JSON: {args.json}")
    if args.plots:
        for path in write_scale_plot(rows, args.plots):
            print(f"plot: {path}")
    worse = [r.jobs for r in rows if r.objective < r.greedy_objective - 1e-6]
    if worse:
        print(f"error: plan worse than greedy at {worse}", file=sys.stderr)
        return 1
    return 0


def _replay_scenarios(args: argparse.Namespace) -> list[Scenario]:
    cluster = read_cluster(args.cluster)
    jobs, errors = split_valid(read_jobs(args.jobs), cluster)
    for error in errors:
        print(f"rejected: {args.jobs}: {error}", file=sys.stderr)
    if not jobs:
        raise WorkloadFileError(str(args.jobs), None, None, "no valid job to replay")
    horizon = args.horizon_s or max(j.submit_s for j in jobs) + max(j.duration_s or 0.0 for j in jobs)
    scenario = Scenario("replay", f"replay of {args.jobs}", cluster, tuple(jobs), horizon)
    if not args.seeds:
        return [scenario]
    return [with_sampled_estimates(scenario, seed) for seed in args.seeds]


def _run_with_progress(scenarios: list[Scenario], policies: list[str], with_bound: bool) -> list[ScenarioReport]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    total = len(scenarios) * (len(policies) + int(with_bound))
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=True
    ) as progress:
        task = progress.add_task("simulating", total=total)

        def done(label: str) -> None:
            progress.update(task, advance=1, description=f"done: {label}")

        return run_benchmark(scenarios, policies, with_bound=with_bound, on_done=done)


if __name__ == "__main__":
    raise SystemExit(main())
