"""The planner's hand-off to HiGHS: the same problem as Pyomo's ``appsi_highs`` builds, solved the same way."""

import subprocess
import sys
import textwrap

import numpy as np
import pyomo.environ as pyo
import pytest
from pyomo.contrib.appsi.solvers import Highs

import airflow_gpu_scheduler.core.planner.model as model_module
from airflow_gpu_scheduler.core.planner import MilpPlanner, PlannerConfig
from airflow_gpu_scheduler.core.planner.highs import to_highs, use_threads
from airflow_gpu_scheduler.core.workload import Cluster, Job

TWO_TYPES = Cluster.from_dict({"gpu_types": {"h100": {"count": 8, "speed": 1.0}, "a10": {"count": 8, "speed": 0.5}}})


def _queue(n=40):
    return [
        Job(f"j{i}", 0.0, "batch_inference", 1 + i % 4, estimate_s=600 + 300 * (i % 7), priority=1 + i % 5)
        for i in range(n)
    ]


def _planner_models(monkeypatch, reserve_penalty=None):
    """The Pyomo models (and columns) a real planning cycle hands to HiGHS."""
    seen = []
    original = model_module.to_highs

    def spy(model):
        seen.append(model)
        return original(model)

    monkeypatch.setattr(model_module, "to_highs", spy)
    config = PlannerConfig(mip_rel_gap=0.0, reserve_penalty=reserve_penalty)
    MilpPlanner(config).plan(TWO_TYPES, _queue(), [], 0.0, streaming_reserve={"h100": 2, "a10": 1})
    assert seen, "the cycle solved no MILP"
    return seen


def _lp(h):
    lp = h.getLp()
    a = lp.a_matrix_
    return {
        "cost": np.array(lp.col_cost_),
        "col_bounds": (np.array(lp.col_lower_), np.array(lp.col_upper_)),
        "row_bounds": (np.array(lp.row_lower_), np.array(lp.row_upper_)),
        "matrix": (a.format_, np.array(a.start_), np.array(a.index_), np.array(a.value_)),
        "integrality": [str(t) for t in lp.integrality_],
        "sense": str(lp.sense_),
        "offset": lp.offset_,
    }


@pytest.mark.parametrize("reserve_penalty", [None, 1.0], ids=["hard reservation", "soft reservation"])
def test_highs_is_given_the_same_problem_as_appsi_gives_it(monkeypatch, reserve_penalty):
    for model in _planner_models(monkeypatch, reserve_penalty):
        ours = _lp(to_highs(model).highs)
        appsi = Highs()
        appsi.set_instance(model)
        theirs = _lp(appsi._solver_model)
        assert ours.keys() == theirs.keys()
        for key in ours:
            np.testing.assert_equal(ours[key], theirs[key], err_msg=key)


def test_a_general_linear_model_solves_to_its_known_optimum():
    # Rows of every shape the reader meets: plain sums (read through Pyomo's general path),
    # constants on both sides, a >= row, an equality, a continuous bounded variable.
    m = pyo.ConcreteModel()
    m.x = pyo.Var([0, 1, 2], domain=pyo.Binary)
    m.y = pyo.Var(bounds=(0, 2.5))
    m.pick_two = pyo.Constraint(expr=m.x[0] + m.x[1] + m.x[2] + 1 == 3)
    m.floor = pyo.Constraint(expr=2 * m.x[0] + m.y >= 1)
    m.cap = pyo.Constraint(expr=3 * m.x[1] + 2 * m.y + 1 <= 6)
    m.value = pyo.Objective(expr=4 * m.x[0] + 5 * m.x[1] + 3 * m.x[2] + m.y + 7, sense=pyo.maximize)
    result = to_highs(m).run(10.0, 0.0, {})
    # x1 and x0 (9), y = 1 (3 + 2y <= 5): 9 + 1 + 7.
    assert result.status == "optimal"
    assert result.objective == pytest.approx(17.0)
    assert [round(v.value) for v in m.x.values()] == [1, 1, 0] and m.y.value == pytest.approx(1.0)
    assert result.bound == pytest.approx(17.0)


def test_a_nonlinear_row_is_refused_by_name():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(domain=pyo.Binary)
    m.y = pyo.Var(domain=pyo.Binary)
    m.row = pyo.Constraint(expr=m.x * m.y <= 1)
    m.value = pyo.Objective(expr=m.x, sense=pyo.maximize)
    with pytest.raises(ValueError, match="not linear"):
        to_highs(m)


def test_an_infeasible_model_has_no_solution_and_keeps_its_values():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(domain=pyo.Binary)
    m.row = pyo.Constraint(expr=m.x >= 2)
    m.value = pyo.Objective(expr=m.x, sense=pyo.maximize)
    m.x.value = 0
    result = to_highs(m).run(10.0, 0.0, {})
    assert result.objective is None and result.status == "infeasible"
    assert m.x.value == 0


def _in_fresh_process(code: str) -> subprocess.CompletedProcess:
    """HiGHS's scheduler is per process, and this one may have solved already: run ``code`` alone."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


_RUN = """
import highspy, numpy as np

def run(threads=None):
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    if threads is not None:
        h.setOptionValue("threads", threads)
    h.addVars(1, np.zeros(1), np.ones(1))
    return h.run() == highspy.HighsStatus.kOk
"""

_PLAN = """
from airflow_gpu_scheduler.core.planner import MilpPlanner, PlannerConfig
from airflow_gpu_scheduler.core.workload import Cluster, Job

def plan():
    cluster = Cluster.from_dict({"gpu_types": {"h100": {"count": 8, "speed": 1.0}}})
    queue = [
        Job(f"j{i}", 0.0, "batch_inference", 1 + i % 4, estimate_s=600 + 300 * (i % 7), priority=1 + i % 5)
        for i in range(30)
    ]
    return MilpPlanner(PlannerConfig(threads=1, time_limit_s=60.0)).plan(cluster, queue, [], 0.0).report
"""


def test_use_threads_sizes_the_scheduler_for_every_later_run():
    done = _in_fresh_process(
        _RUN
        + """
from airflow_gpu_scheduler.core.planner.highs import use_threads

use_threads(1)
# Left at the default, a later run takes the one-thread scheduler; one asking for two is refused.
print(run(), run(1), run(2))
"""
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-3:] == ["True", "True", "False"]


def test_use_threads_resizes_a_scheduler_something_else_sized():
    done = _in_fresh_process(
        _RUN
        + """
from airflow_gpu_scheduler.core.planner.highs import use_threads

print(run(2), run(1))  # sized to two by the first run: one thread is refused
use_threads(1)
print(run(1), run(2))
"""
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-4:] == ["True", "False", "True", "False"]


def test_the_planner_solves_where_highs_already_ran_with_other_threads():
    # An Airflow worker process may have run HiGHS before (another task, the LP bound): the planner's
    # one-thread runs would be refused, and every cycle would quietly fall back to the greedy plan.
    done = _in_fresh_process(
        _RUN
        + _PLAN
        + """
assert run(2)
report = plan()
print(report.method)
print(report.status)
"""
    )
    assert done.returncode == 0, done.stderr
    method, status = done.stdout.splitlines()[-2:]
    assert method.startswith("milp") and status != "error", done.stdout


def test_a_negative_thread_count_is_refused_by_name():
    with pytest.raises(ValueError, match="HiGHS threads must be >= 1"):
        use_threads(0)


def test_a_forked_child_of_a_process_that_ran_highs_threads_gets_the_greedy_plan_and_a_reason():
    # The child inherits a scheduler whose threads did not survive the fork: it cannot be resized,
    # and the cycle says why instead of hanging or failing without a word.
    done = _in_fresh_process(
        _RUN
        + _PLAN
        + """
import os

assert run(2)
pid = os.fork()
if pid == 0:
    report = plan()
    print(report.method, report.status, report.message, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("greedy error HiGHS failed"), done.stdout
    assert "forked from one that had run HiGHS" in done.stdout


def test_a_run_highs_refuses_is_an_error_not_a_model_without_a_solution():
    done = _in_fresh_process(
        _RUN
        + """
import pyomo.environ as pyo
from airflow_gpu_scheduler.core.planner.highs import to_highs

assert run(2)
m = pyo.ConcreteModel()
m.x = pyo.Var(bounds=(0, 1), domain=pyo.Binary)
m.value = pyo.Objective(expr=m.x, sense=pyo.maximize)
try:
    to_highs(m).run(10.0, 0.0, {"threads": 1})
except RuntimeError as error:
    print("raised:", error)
"""
    )
    assert done.returncode == 0, done.stderr
    assert "raised: HiGHS refused to run" in done.stdout, done.stdout


def test_an_option_highs_refuses_is_named():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.value = pyo.Objective(expr=m.x, sense=pyo.maximize)
    with pytest.raises(ValueError, match="HiGHS refused option mip_max_nodes=-5"):
        to_highs(m).run(10.0, 0.0, {"mip_max_nodes": -5})
