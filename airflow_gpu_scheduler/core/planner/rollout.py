"""Rollout over candidate plans: apply whichever of several base plans has the best simulated future.

The MILP is near-optimal for its own model, but its model is not the world: its
objective is a surrogate of the metric, its horizon rolls, and estimates are noisy, so
a plan it prefers can lose to a rule of thumb such as EASY backfill. Each cycle therefore
builds candidate plans (the MILP's, the greedy plan it started from, EASY backfill's
projected plan, and the plan in force, so that a decision once taken is kept unless
something beats it: the "fortified" rollout), follows each forward through Airflow's
dispatch on the same sampled durations (common random numbers, drawn from the errors
completed jobs showed; :mod:`.lookahead`), and applies the one with the best expected
weighted goodput. Taking the best of its base policies' simulated futures at every
decision is at least as good as each of them, up to the simulation's fidelity
(Bertsekas, Tsitsiklis & Wu, "Rollout algorithms for combinatorial optimization", 1997),
so the MILP only has to win where it can.
"""

from __future__ import annotations

import math
import statistics
import time
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from airflow_gpu_scheduler.core.estimates import EstimateErrors
from airflow_gpu_scheduler.core.planner.live import follow_rule
from airflow_gpu_scheduler.core.planner.lookahead import RecentDemand, Score, follow_plan, sample_futures, score
from airflow_gpu_scheduler.core.planner.milp import MilpPlanner
from airflow_gpu_scheduler.core.planner.plan import Plan, PlannerConfig
from airflow_gpu_scheduler.core.planner.projection import projected_plan
from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob, allowed_types, runtime_s

#: On a tie, the earlier candidate wins: keeping the plan in force costs no churn, and the
#: MILP's plan is the one whose reasons the review page explains best.
PREFERENCE = (
    "kept",
    "milp",
    "backfill_live",
    "backfill",
    "greedy",
    "backfill_cautious",
    "backfill_unreserved",
    "hold",
)
#: A batch job is held (the ``hold`` candidate) when work of higher priority is more likely than
#: not to be submitted while it would run: arrivals at the recent rate, odds of one or more >= 1/2.
HOLD_ODDS = math.log(2.0)
#: The quantile of a running job's runtime that the cautious candidate drains by.
CAUTIOUS_QUANTILE = 0.9


@dataclass(frozen=True)
class RolloutConfig:
    """Knobs of the rollout.

    :param samples: sampled futures per cycle; each candidate is followed through all of them.
    :param lookahead_s: how far each future is followed: long enough to see a drain for a
        gang pay off, short enough that the queue of now still matters at its end.
    :param checkpoints: goodput is averaged over this many evenly spaced points of the
        look-ahead, so work done sooner counts more.
    :param seed: the sampled durations depend only on (seed, job, sample).
    :param enabled: off: the MILP's plan is applied as it is.
    :param candidates: the base plans compared besides the MILP's (see :data:`PREFERENCE`).
    :param switch_margin: the plan in force (``kept``; with none, ``default``) is replaced only by a
        candidate whose expected goodput beats it by more than this fraction. The look-ahead is
        an imperfect model (by default no batch arrivals; a few samples), so the best of several scores is
        biased upwards (the winner's curse) and a switch on a small edge is as likely to lose as
        to win; switching also breaks the promises the plan in force made.
    :param default: the incumbent when no plan is in force.
    :param batch_arrivals: the futures also bring batch work at the rate it was submitted recently,
        so that a candidate keeping GPUs free for it (``hold``) can be valued; off by default
        (docs/benchmark.md): GPUs kept free pay only where important batch work keeps coming while
        long low-priority work waits, and are lost where it does not come, and every sampled
        arrival is another event each candidate follows.
    """

    samples: int = 8
    lookahead_s: float = 6 * 3600.0
    checkpoints: int = 6
    seed: int = 0
    enabled: bool = True
    candidates: tuple[str, ...] = ("kept", "backfill", "greedy")
    switch_margin: float = 0.02
    default: str = "milp"
    batch_arrivals: bool = False

    def __post_init__(self) -> None:
        if not self.switch_margin >= 0.0:
            raise ValueError(f"RolloutConfig.switch_margin must be >= 0, got {self.switch_margin!r}")
        for name in (self.default, *self.candidates):
            if name not in PREFERENCE:
                raise ValueError(f"unknown rollout candidate {name!r}; known: {', '.join(PREFERENCE)}")
        if "hold" in self.candidates and not self.batch_arrivals:
            # Futures without batch work could only ever score holding as a loss.
            raise ValueError("RolloutConfig: the 'hold' candidate needs batch_arrivals=True")


class RolloutPlanner:
    """Plans a cycle with the MILP, then applies the best of the candidate plans by simulated goodput."""

    def __init__(self, config: PlannerConfig | None = None, rollout: RolloutConfig | None = None) -> None:
        self.milp = MilpPlanner(config)
        self.rollout = rollout or RolloutConfig()

    @property
    def config(self) -> PlannerConfig:
        return self.milp.config

    def plan(
        self,
        cluster: Cluster,
        queued: Sequence[Job],
        running: Sequence[RunningJob],
        now_s: float,
        streaming_reserve: Mapping[str, int] | None = None,
        previous: Mapping[str, float] | None = None,
        errors: EstimateErrors | None = None,
        in_force: Plan | None = None,
        demand: RecentDemand | None = None,
    ) -> Plan:
        """The cycle's plan. ``previous``: the planned starts of the plan in force (its near-term
        promises are priced into the MILP, see :class:`MilpPlanner`); ``in_force``: that plan
        itself, a candidate; ``errors``: what completed jobs showed (default: a log-normal guess);
        ``demand``: the endpoints seen recently, from which the futures draw new arrivals."""
        rate = demand.value_rate() if demand is not None else 0.0
        plans = self.milp.plans(cluster, queued, running, now_s, streaming_reserve, previous, streaming_value_rate=rate)
        milp = plans.milp
        if not self.rollout.enabled or not queued:
            return milp
        t0 = time.perf_counter()
        errors = errors or EstimateErrors()
        candidates = self.candidates(
            cluster, queued, running, now_s, plans.milp, plans.greedy, in_force, errors, demand
        )
        scores = self.evaluate(candidates, cluster, queued, running, now_s, errors, demand)
        # Goodput decides; within a hair of the best (sampling noise), utilization, then PREFERENCE.
        top = max(s.goodput for s in scores.values())
        near = [name for name in candidates if scores[name].goodput >= top - 1e-9 * max(1.0, abs(top))]
        best = max(near, key=lambda name: (round(scores[name].busy_gpu_s, 3), -PREFERENCE.index(name)))
        # Hysteresis: the incumbent stays unless beaten by more than the margin (see RolloutConfig).
        # The plan in force is no incumbent while it holds work the best candidate places: what
        # arrived since it was made must not wait for another plan to win by the margin.
        incumbent = "kept" if "kept" in candidates else self.rollout.default
        if incumbent == "kept" and set(candidates["kept"].unplanned) - set(candidates[best].unplanned):
            incumbent = self.rollout.default
        margin = 1.0 + self.rollout.switch_margin
        if incumbent in candidates and scores[best].goodput <= scores[incumbent].goodput * margin:
            best = incumbent
        chosen = candidates[best]
        rollout_s = time.perf_counter() - t0
        report = replace(
            milp.report,
            chosen=best,
            rollout_s=rollout_s,
            wall_s=milp.report.wall_s + rollout_s,
            candidates={name: s.goodput for name, s in scores.items()},
        )
        return Plan(now_s, chosen.starts, chosen.unplanned, report, chosen.streaming_reserve, chosen.rule)

    def candidates(
        self,
        cluster: Cluster,
        queued: Sequence[Job],
        running: Sequence[RunningJob],
        now_s: float,
        milp: Plan,
        greedy: Plan,
        in_force: Plan | None,
        errors: EstimateErrors | None = None,
        demand: RecentDemand | None = None,
    ) -> dict[str, Plan]:
        """The plans to compare, by name (duplicates of the MILP's plan left out)."""
        from airflow_gpu_scheduler.core.policies.backfill import EasyBackfillPolicy

        # The greedy plan never uses the reservation (even a soft one): the heuristics keep it whole.
        reserve = greedy.streaming_reserve
        wanted = set(self.rollout.candidates)
        out = {"milp": milp}
        until = now_s + self.rollout.lookahead_s
        live = None
        if "backfill_live" in wanted or (in_force is not None and in_force.rule):
            # EASY backfill itself, re-deciding at every change, as the baseline does (no reservation).
            unreserved = dict.fromkeys(cluster.names, 0)
            live = replace(
                projected_plan(
                    EasyBackfillPolicy(), cluster, queued, running, now_s, until, unreserved, "backfill_live"
                ),
                rule="backfill",
            )
        if in_force is not None and in_force.rule and "kept" in wanted:
            assert live is not None  # made above whenever a rule is in force
            out["kept"] = live  # the rule in force goes on deciding live
        elif in_force is not None and "kept" in wanted:
            waiting = [j.job_id for j in queued]
            still = set(waiting)
            kept = tuple(s for s in in_force.starts if s.job_id in still)
            if kept:
                placed = {s.job_id for s in kept}
                # A plan that used a soft reservation keeps the GPUs it took from it; a hard one
                # is this cycle's reservation, whatever the plan in force held.
                held = dict(reserve)
                if self.milp.config.reserve_penalty is not None:
                    held = {k: min(r, in_force.streaming_reserve.get(k, r)) for k, r in reserve.items()}
                out["kept"] = Plan(now_s, kept, tuple(j for j in waiting if j not in placed), in_force.report, held)
        if "backfill_live" in wanted:
            assert live is not None  # made above whenever it is wanted
            out["backfill_live"] = live
        if "backfill" in wanted:
            out["backfill"] = projected_plan(
                EasyBackfillPolicy(), cluster, queued, running, now_s, until, reserve, "backfill"
            )
        if "greedy" in wanted:
            out["greedy"] = greedy
        if running and "backfill_cautious" in wanted:
            # A drain for a gang is a bet that what runs ends on time: EASY backfill with every running
            # job expected to end late (a high quantile of the errors seen) lets more work in first.
            late = [_expected_late(r, cluster, errors or EstimateErrors(), now_s) for r in running]
            out["backfill_cautious"] = projected_plan(
                EasyBackfillPolicy(), cluster, queued, late, now_s, until, reserve, "backfill_cautious"
            )
        if any(reserve.values()) and "backfill_unreserved" in wanted:
            # The reservation is a bet on endpoints to come; the futures' arrivals say whether it pays.
            none = dict.fromkeys(reserve, 0)
            out["backfill_unreserved"] = projected_plan(
                EasyBackfillPolicy(), cluster, queued, running, now_s, until, none, "backfill_unreserved"
            )
        if "hold" in wanted and demand is not None:
            # Starting long work of low priority is a bet that nothing more important comes while it
            # runs; the futures' batch arrivals say whether keeping its GPUs free pays.
            passed = _likely_passed(queued, cluster, demand) & {s.job_id for s in milp.starts}
            if passed:
                starts = tuple(s for s in milp.starts if s.job_id not in passed)
                starts = tuple(replace(s, rank=rank) for rank, s in enumerate(starts))
                unplanned = milp.unplanned + tuple(j.job_id for j in queued if j.job_id in passed)
                out["hold"] = Plan(now_s, starts, unplanned, milp.report, milp.streaming_reserve)
        # A candidate that acts like one preferred over it is left out.
        unique: dict[str, Plan] = {"milp": milp}
        for name in sorted(out, key=PREFERENCE.index):
            if all(_signature(out[name]) != _signature(p) for p in unique.values()):
                unique[name] = out[name]
        return unique

    def evaluate(
        self,
        candidates: Mapping[str, Plan],
        cluster: Cluster,
        queued: Sequence[Job],
        running: Sequence[RunningJob],
        now_s: float,
        errors: EstimateErrors,
        demand: RecentDemand | None = None,
    ) -> dict[str, Score]:
        """Each candidate's mean score over the same sampled futures."""
        cfg = self.rollout
        until = now_s + cfg.lookahead_s
        checkpoints = [now_s + cfg.lookahead_s * (i + 1) / cfg.checkpoints for i in range(cfg.checkpoints)]
        futures = sample_futures(
            cluster, queued, running, now_s, errors, cfg.samples, cfg.seed, demand, cfg.lookahead_s, cfg.batch_arrivals
        )
        out = {}
        for name, plan in candidates.items():
            if plan.rule:
                runs = [
                    score(follow_rule(plan.rule, cluster, queued, running, now_s, until, f), checkpoints)
                    for f in futures
                ]
            else:
                runs = [
                    score(follow_plan(plan, cluster, queued, running, now_s, until, f), checkpoints) for f in futures
                ]
            out[name] = Score(statistics.fmean(s.goodput for s in runs), statistics.fmean(s.busy_gpu_s for s in runs))
        return out


def _expected_late(r: RunningJob, cluster: Cluster, errors: EstimateErrors, now_s: float) -> RunningJob:
    """``r`` with its estimate stretched to the ``CAUTIOUS_QUANTILE`` of the runtimes jobs of its kind showed."""
    expected = runtime_s(r.job, r.job.planning_estimate_s, cluster.gpu_type(r.gpu_type))
    elapsed = max(0.0, now_s - r.start_s) / expected if expected > 0 else 0.0
    ratio = errors.quantile(r.job.kind, CAUTIOUS_QUANTILE, at_least=elapsed)
    return replace(r, job=r.job.with_estimate(r.job.planning_estimate_s * max(ratio, 1e-3)))


def _likely_passed(queued: Sequence[Job], cluster: Cluster, demand: RecentDemand) -> set[str]:
    """Batch jobs that work of higher priority, submitted at the recent rate, is more likely than
    not to arrive during (by their fastest expected runtime)."""
    if not demand.batch or demand.window_s <= 0:
        return set()
    priorities = sorted(b.priority for b in demand.batch)
    out = set()
    for job in queued:
        if job.is_streaming:
            continue
        higher = len(priorities) - bisect_right(priorities, job.priority)
        runtime = min(runtime_s(job, job.planning_estimate_s, g) for g in allowed_types(job, cluster))
        if higher / demand.window_s * runtime >= HOLD_ODDS:
            out.add(job.job_id)
    return out


def _signature(plan: Plan) -> tuple:
    """What makes two plans act alike: the rule they follow live, or each job's GPU type, start and rank."""
    if plan.rule:
        return ("rule", plan.rule)
    return tuple(sorted((s.job_id, s.gpu_type, round(s.start_s, 3), s.rank) for s in plan.starts))
