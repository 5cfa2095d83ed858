"""The benchmark's tables: a console table and a Markdown table of the same summary.

Both show, per scenario and policy, the mean (and, over several seeds, the spread)
of the metrics, and one line per scenario on how ``milp`` fared against the best
other policy run by run, against FIFO, and how much of the distance to the
clairvoyant yardstick it closed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from airflow_gpu_scheduler.core.benchmark import ScenarioSummary, Spread, pct

OURS = "milp"


def _m(spread: Spread | None, scale: float = 1.0, spec: str = ".2f", sd: bool = True) -> str:
    if spread is None:
        return "-"
    text = format(spread.mean / scale, spec)
    if sd and spread.n > 1:
        text += f" ± {format(spread.sd / scale, spec)}"
    return text


def _mean(spread: Spread | None) -> float:
    """The mean of a metric every run of the policy has (a policy with runs has a spread of each)."""
    if spread is None:
        raise ValueError("no finite value of this metric in any run")
    return spread.mean


def _high(spread: Spread | None) -> str:
    """The worst run's value (a time budget is judged by its worst case)."""
    return "-" if spread is None else f"{spread.high:.2f}"


def _signed(value: float | None, spec: str = "+.1f", unit: str = " %") -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "+inf" + unit
    return format(value, spec) + unit


def versus_line(summary: ScenarioSummary) -> str:
    """milp against the best other policy, FIFO and the clairvoyant yardstick, in words."""
    parts = []
    v = summary.versus
    if v is not None:
        worst = _signed(v.worst_delta_pct) + (f" (seed {v.worst_seed})" if v.worst_seed is not None else "")
        parts.append(
            f"goodput vs best other ({v.best_by_mean}): mean {_signed(v.mean_delta_pct)}, "
            f"wins {v.wins}/{v.runs}, worst run {worst}"
        )
    fifo, ours = summary.spreads.get("fifo"), summary.spreads.get(OURS)
    if fifo and ours and fifo["weighted_goodput"] and ours["weighted_goodput"]:
        util = (_mean(ours["utilization"]) - _mean(fifo["utilization"])) * 100
        parts.append(
            f"vs fifo: {util:+.1f} pt util, goodput "
            f"{_signed(pct(_mean(ours['weighted_goodput']), _mean(fifo['weighted_goodput'])))}, output "
            f"{_signed(pct(_mean(ours['weighted_output']), _mean(fifo['weighted_output'])))}"
        )
    if summary.closes_to_clairvoyant is not None:
        parts.append(f"closes {summary.closes_to_clairvoyant * 100:.0f} % of best other -> clairvoyant")
    return "; ".join(parts)


def print_summary(summaries: Sequence[ScenarioSummary]) -> None:
    from rich.console import Console
    from rich.table import Table

    seeds = sorted({r.scenario.seed for s in summaries for r in s.runs if r.scenario.seed is not None})
    title = "GPU scheduling policies, same cluster and workload (window [0, horizon])" + (
        f"; mean ± sd over seeds {seeds}" if len(seeds) > 1 else f"; seed {seeds[0]}" if seeds else ""
    )
    table = Table(title=title)
    for col in (
        "scenario",
        "policy",
        "util",
        "goodput M",
        "output M",
        "% of bound",
        "stream p95 wait s",
        "stream on time",
        "deadline hit",
        "max wait h",
        "plan p95 s (max)",
    ):
        table.add_column(col, justify="left" if col in ("scenario", "policy") else "right")
    for summary in summaries:
        bound = summary.upper_bound
        for i, (name, spreads) in enumerate(summary.spreads.items()):
            good = spreads["weighted_goodput"]
            of_bound = f"{good.mean / bound.mean * 100:.1f}%" if good and bound and bound.mean > 0 else "-"
            table.add_row(
                summary.name if i == 0 else "",
                f"[bold]{name}[/bold]" if name == OURS else name,
                _m(spreads["utilization"], spec=".3f"),
                _m(good, 1e6),
                _m(spreads["weighted_output"], 1e6),
                of_bound,
                _m(spreads["streaming_p95_wait_s"], spec=".0f", sd=False),
                _m(spreads["streaming_on_time_rate"], spec=".0%", sd=False),
                _m(spreads["deadline_hit_rate"], sd=False),
                _m(spreads["max_wait_s"], 3600, ".1f", sd=False),
                _high(spreads["plan_p95_s"]),
            )
        table.add_section()
    console = Console(width=200)
    console.print(table)
    for summary in summaries:
        sc = summary.runs[0].scenario
        console.print(
            f"{summary.name} ({len(sc.jobs)} jobs, {sc.cluster.total_gpus} GPUs, load "
            f"{sc.offered_load:.2f}): {versus_line(summary)}",
            highlight=False,
        )
    wins = [s.versus for s in summaries if s.versus is not None]
    if wins:
        runs = sum(v.runs for v in wins)
        print(
            f"milp >= best other policy (weighted goodput): {sum(v.wins for v in wins)} of {runs} runs; "
            f"mean >= best mean in {sum(v.mean_delta_pct >= -1e-9 for v in wins)} of {len(wins)} scenarios; "
            f"worst run {min(v.worst_delta_pct for v in wins):+.1f} %"
        )


def markdown(summaries: Sequence[ScenarioSummary]) -> str:
    """The headline table: per scenario, each policy's mean goodput and utilization, and milp's record."""
    policies = list(summaries[0].spreads) if summaries else []
    head = (
        ["scenario", "jobs / GPUs / load"]
        + [f"{p} goodput M / util" for p in policies]
        + [
            "milp vs best other: mean / wins / worst",
            "milp vs fifo: util / goodput / output",
            "closes to clairvoyant",
            "stream p95 s (airflow / milp)",
            "stream on time (airflow / milp)",
            "milp plan p95 s (max)",
        ]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summaries:
        sc = s.runs[0].scenario
        cells = [s.name, f"{len(sc.jobs)} / {sc.cluster.total_gpus} / {sc.offered_load:.2f}"]
        for p in policies:
            g, u = s.spreads[p]["weighted_goodput"], s.spreads[p]["utilization"]
            text = f"{_m(g, 1e6)} / {_m(u, spec='.3f', sd=False)}"
            cells.append(f"**{text}**" if p == OURS else text)
        v = s.versus
        cells.append(
            "-"
            if v is None
            else f"{v.best_by_mean}: {_signed(v.mean_delta_pct)} / {v.wins} of {v.runs} / {_signed(v.worst_delta_pct)}"
        )
        fifo, ours = s.spreads.get("fifo"), s.spreads.get(OURS)
        if fifo and ours:
            cells.append(
                f"{(_mean(ours['utilization']) - _mean(fifo['utilization'])) * 100:+.1f} pt / "
                f"{_signed(pct(_mean(ours['weighted_goodput']), _mean(fifo['weighted_goodput'])))} / "
                f"{_signed(pct(_mean(ours['weighted_output']), _mean(fifo['weighted_output'])))}"
            )
        else:
            cells.append("-")
        cells.append("-" if s.closes_to_clairvoyant is None else f"{s.closes_to_clairvoyant * 100:.0f} %")
        air = s.spreads.get("airflow", {}).get("streaming_p95_wait_s")
        mine = ours["streaming_p95_wait_s"] if ours else None
        cells.append(f"{_m(air, spec='.0f', sd=False)} / {_m(mine, spec='.0f', sd=False)}")
        air = s.spreads.get("airflow", {}).get("streaming_on_time_rate")
        mine = ours["streaming_on_time_rate"] if ours else None
        cells.append(f"{_m(air, spec='.0%', sd=False)} / {_m(mine, spec='.0%', sd=False)}")
        cells.append(_high(ours["plan_p95_s"]) if ours else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
