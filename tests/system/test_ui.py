"""The GPU Schedule review page on a real Airflow 3.3, driven in headless Chromium (Debian's, via Playwright).

One Airflow (SQLite) serves the whole module, and the tests run in order: first the states
before any plan (401 without login, "no plan yet"), then a small GPU workload planned by the
proof's ``plan_scheduler`` DAG and reviewed through the UI's own navigation, then a synthetic
plan of 2,000 jobs (every bar drawn, the long waiting list paged, the window selector; its load
time is printed). Screenshots go to ``artifacts/ui/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from gpu_airflow_support import DAGS, database_url
from sqlalchemy import create_engine

from airflow_gpu_scheduler.embedded import EmbeddedAirflow
from airflow_gpu_scheduler.hooks.metadata import GpuSchedulerMetadataHook

pytestmark = pytest.mark.airflow

CLUSTER = {"gpu_types": {"h100": {"count": 4, "speed": 1.0}, "a100": {"count": 2, "speed": 1.0}}}
ARTIFACTS = Path(__file__).parents[2] / "artifacts" / "ui"
PREFIX = "/gpu-scheduler"
ROUTES = [
    "/",
    "/api/plan",
    "/api/plans",
    "/api/jobs/a/b/c/-1",
    "/api/utilization",
    "/api/openapi.json",
    "/static/gpu_schedule.js",
]
LONG_S = 300  # the first jobs hold their GPUs for the whole test
DAG_OF_KIND = {
    "training": ("plan_train", "train"),
    "batch_inference": ("ui_batch", "score"),
    "quantization": ("plan_quant", "quantize"),
    "realtime_inference": ("ui_stream", "serve"),
}


def chromium_path() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        pytest.fail("Debian's chromium is missing: run scripts/setup.sh (it installs it with apt-get)")
    return path


@pytest.fixture(scope="module")
def airflow(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow-ui")
    with contextlib.ExitStack() as stack:
        url = database_url("sqlite", home, stack)
        instance = EmbeddedAirflow(
            home,
            DAGS,
            database_url=url,
            users={"admin": ("admin", "admin"), "viewer": ("viewer", "viewer")},
            extra_env={"AIRFLOW_VAR_GPU_SCHEDULER_CLUSTER": json.dumps(CLUSTER)},
        )
        stack.callback(instance.stop)
        instance.start()
        instance.wait_for_dags(["plan_quant", "plan_train", "plan_mapped", "plan_scheduler", "ui_stream", "ui_batch"])
        instance.engine = create_engine(url)
        stack.callback(instance.engine.dispose)
        yield instance


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright  # a test extra: missing means set-up failed, not "skip"

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        yield chromium
        chromium.close()


# --------------------------------------------------------------------------- helpers


def get(af: EmbeddedAirflow, path: str, token: str | None = "admin") -> tuple[int, object]:
    """GET a plugin route as ``token`` (a user name, or None for no credentials): (status, JSON or text)."""
    request = urllib.request.Request(af.base_url + PREFIX + path)
    if token:
        request.add_header("Authorization", f"Bearer {login_token(af, token)}")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            body, status = answer.read().decode(), answer.status
    except urllib.error.HTTPError as error:
        body, status = error.read().decode(), error.code
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body


_tokens: dict[str, str] = {}


def login_token(af: EmbeddedAirflow, user: str) -> str:
    if user not in _tokens:
        request = urllib.request.Request(
            af.base_url + "/auth/token",
            method="POST",
            data=json.dumps({"username": user, "password": user}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            _tokens[user] = json.loads(answer.read())["access_token"]
    return _tokens[user]


def task_states(af: EmbeddedAirflow, dag_ids: list[str]) -> list[str]:
    states = []
    for dag_id in dag_ids:
        states += [ti["state"] for ti in af.api("GET", f"/dags/{dag_id}/dagRuns/~/taskInstances")["task_instances"]]
    return states


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(1)
    raise TimeoutError(f"timed out waiting for {what}")


def plan_cycle(af: EmbeddedAirflow, run_id: str) -> None:
    """One planning cycle by the proof's scheduler DAG (collect, plan, apply, record)."""
    af.api("POST", "/dags/plan_scheduler/dagRuns", {"dag_run_id": run_id, "logical_date": None, "conf": {}})
    state = af.wait_for_runs([("plan_scheduler", run_id)], timeout_s=240)[("plan_scheduler", run_id)]
    assert state == "success", f"planning run {run_id} failed; see the task log"


def open_review_page(context, af: EmbeddedAirflow):
    """Log in through the UI's form and open "GPU Schedule" from the Browse menu; returns (page, frame)."""
    page = context.new_page()
    page.goto(af.base_url + "/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", "admin")
    page.click("button[type=submit]")
    page.wait_for_url(af.base_url + "/")
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="GPU Schedule").click()
    page.wait_for_url("**/plugin/gpu-schedule**")
    frame_element = page.wait_for_selector("iframe")
    frame = frame_element.content_frame()
    frame.wait_for_selector("body[data-ready]", timeout=60_000)
    assert frame.url.endswith(PREFIX + "/"), frame.url
    return page, frame


def bars(frame) -> list[dict]:
    return frame.evaluate("""() => Array.from(document.querySelectorAll('rect.bar')).map(r => ({
        key: r.dataset.key, lane: r.dataset.lane, start: +r.dataset.start, x: +r.getAttribute('x'),
        decision: r.getAttribute('class').split(' ')[1]}))""")


# --------------------------------------------------------------------------- tests (in order)


def test_every_route_needs_a_logged_in_user(airflow):
    for route in ROUTES:
        status, body = get(airflow, route, token=None)
        assert status == 401, (route, status, body)
    # FastAPI's own docs routes are switched off: the API description is a protected route.
    assert get(airflow, "/docs", token=None)[0] == 404
    status, spec = get(airflow, "/api/openapi.json")
    assert status == 200 and {"/api/plan", "/api/plans", "/api/jobs/{key}", "/api/utilization"} <= set(spec["paths"])
    # Read access is checked by the auth manager: a viewer may read.
    assert get(airflow, "/api/plan", token="viewer")[0] == 200


def test_before_the_first_plan_the_api_and_page_say_so(airflow, browser):
    status, body = get(airflow, "/api/plan")
    assert status == 200 and body["plan"] is None and body["jobs"] == [] and body["lanes"] == []
    assert get(airflow, "/api/plans") == (200, {"plans": []})
    assert get(airflow, "/api/jobs/plan_train/x/train/-1")[0] == 404
    context = browser.new_context(viewport={"width": 1400, "height": 800})
    page, frame = open_review_page(context, airflow)
    assert frame.is_visible("text=No plan yet") and not frame.is_visible("#content")
    page.screenshot(path=str(ARTIFACTS / "no-plan.png"))
    context.close()


def test_the_page_shows_the_plan_lanes_order_and_why_jobs_wait(airflow, browser):
    af = airflow
    # Jobs that hold GPUs for the rest of the test: three quantizations and a real-time endpoint.
    for i in range(3):
        af.trigger("plan_quant", f"long_q{i}", {"sleep": LONG_S})
    af.trigger("ui_stream", "endpoint", {"sleep": LONG_S})
    wait_until(lambda: task_states(af, ["plan_quant", "ui_stream"]).count("scheduled") == 4, 120, "first jobs queued")
    plan_cycle(af, "review_1")
    wait_until(lambda: task_states(af, ["plan_quant", "ui_stream"]).count("running") == 4, 180, "first jobs running")
    # Then the queue to review: a 4-GPU training gang, small jobs, a mapped task, a job with a deadline.
    af.trigger("plan_train", "train")
    for i in range(3):
        af.trigger("plan_quant", f"q{i}", {"sleep": 2})
    af.trigger("plan_mapped", "mapped")
    af.trigger("ui_batch", "batch")
    dags = ["plan_train", "plan_quant", "plan_mapped", "ui_batch"]
    wait_until(lambda: task_states(af, dags).count("scheduled") == 7, 120, "the queue to be scheduled")
    plan_cycle(af, "review_2")

    # The JSON API: the newest plan, every job with its place, lane and reason.
    status, data = get(af, "/api/plan")
    assert status == 200
    plan, jobs = data["plan"], {j["key"]: j for j in data["jobs"]}
    assert plan["run_id"] == "review_2" and plan["status"] and plan["wall_s"] > 0 and plan["applied"] is True
    assert {"plan", "airflow"} <= set(plan["predicted"]) and plan["cluster"] == CLUSTER
    assert [lane["id"] for lane in data["lanes"]][:2] == ["h100", "a100"]
    assert "a100:streaming" in {lane["id"] for lane in data["lanes"]}, "the endpoint's reservation has a lane"
    assert sum(j["decision"] == "running" for j in jobs.values()) == 4
    train = jobs["plan_train/train/train/-1"]
    # The gang is next on h100: released ahead, it waits in its pool until the 4 GPUs are free
    # (the pool's slots are the gate), or it is still held behind work planned before it.
    assert (
        train["decision"] in ("released", "held") and train["lane"] == "h100" and train["estimate_source"] == "declared"
    )
    assert train["ti_url"] == "/dags/plan_train/runs/train/tasks/train"
    endpoint = jobs["ui_stream/endpoint/serve/-1"]
    assert endpoint["lane"] == "a100:streaming" and endpoint["pool"] == "gpu_a100_streaming"
    batch = jobs["ui_batch/batch/score/-1"]
    assert batch["deadline_s"] and batch["deadline_met"] in (True, False)
    assert jobs["plan_mapped/mapped/score/1"]["ti_url"].endswith("/tasks/score/mapped/1")
    held = [j for j in jobs.values() if j["decision"] in ("held", "unplanned")]
    assert held and all(j["reason"] and j["reason_code"] for j in held), held
    for key in ("planned_start_s", "expected_end_s", "priority_weight", "pool", "gpus", "priority", "kind"):
        assert key in train
    waiter = next(j for j in held if j["decision"] == "held")

    status, history = get(af, "/api/plans?limit=5")
    assert status == 200 and [p["run_id"] for p in history["plans"]] == ["review_2", "review_1"]
    assert history["plans"][1]["moved"] == 4 and history["plans"][1]["decisions"] == {"released": 4}
    status, one = get(af, "/api/jobs/" + urllib.parse.quote(waiter["key"]))
    assert status == 200 and one["job"]["reason"] == waiter["reason"]
    assert [h["decision"] for h in one["history"]] == ["held"]
    assert get(af, "/api/jobs/plan_train/no_such_run/train/-1")[0] == 404
    status, usage = get(af, "/api/utilization?hours=1")
    assert status == 200 and usage["capacity"] == {"h100": 4, "a100": 2}
    assert max(b["utilization"] for b in usage["buckets"]) > 0, "the running jobs show as realized utilization"

    # The page, reached through the UI's own navigation, light then dark.
    for scheme in ("light", "dark"):
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme=scheme)
        page, frame = open_review_page(context, af)
        assert frame.evaluate("document.documentElement.dataset.theme") == scheme
        drawn = bars(frame)
        planned = {k: j for k, j in jobs.items() if j["lane"]}
        assert {b["key"] for b in drawn} == set(planned), "one bar per planned or running job"
        for bar in drawn:
            assert bar["lane"] == planned[bar["key"]]["lane"], bar
            assert bar["decision"] == planned[bar["key"]]["decision"], bar
        for lane in {b["lane"] for b in drawn}:
            in_lane = sorted((b for b in drawn if b["lane"] == lane), key=lambda b: b["start"])
            xs = [b["x"] for b in in_lane]
            assert xs == sorted(xs), f"bars of lane {lane} are not in planned-start order"
        train_x = next(b["x"] for b in drawn if b["key"] == train["key"])
        running_h100 = [b["x"] for b in drawn if b["lane"] == "h100" and b["decision"] == "running"]
        assert all(x < train_x for x in running_h100), "the gang is drawn after the jobs it waits for"

        row = frame.locator(f'#waiting tr[data-key="{waiter["key"]}"]')
        assert row.locator("td.reason").inner_text() == waiter["reason"]
        assert frame.locator("#waiting tbody tr").count() == len(held)
        page.screenshot(path=str(ARTIFACTS / f"gpu-schedule-{scheme}.png"))

        frame.locator(f'rect.bar[data-key="{waiter["key"]}"]').click()
        details = frame.locator("#details")
        details.locator("text=History over the last plans").wait_for()
        link = details.locator("a").first
        assert link.get_attribute("href") == waiter["ti_url"] and link.get_attribute("target") == "_top"
        assert waiter["reason"] in details.inner_text()

        # Switching the UI's theme switches the page at once (it watches the UI's <html> class).
        other = "light" if scheme == "dark" else "dark"
        page.evaluate(f"document.documentElement.classList.replace('{scheme}', '{other}')")
        frame.wait_for_function(f"document.documentElement.dataset.theme === '{other}'", timeout=5000)

        # The whole page, outside the UI frame, with the session cookie the UI set at login.
        full = context.new_page()
        full.set_viewport_size({"width": 1300, "height": 900})
        full.goto(af.base_url + PREFIX + "/")
        full.wait_for_selector("body[data-ready='1']")
        full.screenshot(path=str(ARTIFACTS / f"gpu-schedule-full-{scheme}.png"), full_page=True)
        context.close()


def synthetic_plan(n_jobs: int, now_s: float, seed: int = 7) -> tuple[dict, list[dict]]:
    """A plan as the operator records it, for ``n_jobs`` jobs packed first-fit on three GPU types."""
    rng = random.Random(seed)
    cluster = {
        "gpu_types": {
            "h100": {"count": 64, "speed": 1.0},
            "a100": {"count": 32, "speed": 0.7},
            "l4": {"count": 16, "speed": 0.4},
        }
    }
    reserve = {"h100": 4, "a100": 2, "l4": 2}
    # GPUs per (type, streaming?): streaming work runs on the reserved GPUs, batch work on the rest.
    free = {
        (name, streaming): [
            now_s - rng.uniform(0, 1800) for _ in range(reserve[name] if streaming else spec["count"] - reserve[name])
        ]
        for name, spec in cluster["gpu_types"].items()
        for streaming in (False, True)
    }
    kinds = ["training", "batch_inference", "quantization", "realtime_inference"]
    rows = []
    for i in range(n_jobs):
        kind = rng.choices(kinds, weights=[2, 4, 4, 1])[0]
        gpu_type = rng.choices(["h100", "a100", "l4"], weights=[64, 22, 6])[0]  # by throughput
        gpus_free = free[gpu_type, kind == "realtime_inference"]
        gpus = min(rng.choice([1, 1, 2, 4, 8] if kind == "training" else [1, 1, 1, 2]), len(gpus_free))
        estimate = rng.uniform(600, 3600) if kind == "training" else rng.uniform(60, 900)
        slots = sorted(range(len(gpus_free)), key=lambda g: gpus_free[g])[:gpus]
        start = max(gpus_free[g] for g in slots)
        end = start + estimate / (1.0 if kind == "realtime_inference" else cluster["gpu_types"][gpu_type]["speed"])
        for g in slots:
            gpus_free[g] = end
        decision = "running" if start < now_s else ("released" if start < now_s + 60 else "held")
        # Named after the real DAGs of this Airflow, so the page may show them (the user can read them).
        dag_id, task_id = DAG_OF_KIND[kind]
        job_id = f"{dag_id}/synthetic_{i}/{task_id}/-1"
        rows.append(
            {
                "job_id": job_id,
                "dag_id": dag_id,
                "run_id": f"synthetic_{i}",
                "task_id": task_id,
                "map_index": -1,
                "decision": decision,
                "kind": kind,
                "gpus": gpus,
                "priority": rng.choice([1, 2, 5, 9]),
                "estimate_s": estimate,
                "estimate_source": rng.choice(["declared", "group history", "kind history"]),
                "gpu_type": gpu_type,
                "pool": f"gpu_{gpu_type}" if decision != "held" else "gpu_intake",
                "weight": 1_000_000 - 10 * i,
                "rank": i,
                "planned_start_s": start,
                "planned_end_s": end,
                "deadline_s": end + rng.uniform(-600, 3600) if rng.random() < 0.2 else None,
                "reason": f"all {cluster['gpu_types'][gpu_type]['count']} {gpu_type} GPUs are busy"
                if decision == "held"
                else None,
                "reason_code": "busy" if decision == "held" else None,
            }
        )
    plan = {
        "created_s": now_s,
        "dag_id": "synthetic",
        "run_id": "scale",
        "cluster": json.dumps(cluster),
        "method": "milp",
        "status": "optimal",
        "objective": 1.0,
        "greedy_objective": 1.0,
        "bound": 1.0,
        "gap": 0.0,
        "wall_s": 1.9,
        "waiting": sum(r["decision"] != "running" for r in rows),
        "running": sum(r["decision"] == "running" for r in rows),
        "due": sum(r["decision"] == "released" for r in rows),
        "rejected": 0,
        "pool_slots": "{}",
        "streaming_reserve": json.dumps(reserve),
        "applied": True,
        "moved": 0,
    }
    return plan, rows


def test_two_thousand_planned_jobs_are_all_drawn_listed_in_plan_order_and_windowed(airflow, browser):
    """A plan of 2,000 jobs: one bar per job in its lane, the first 200 held jobs listed in plan order
    with the rest on request, and "Next hour" keeping exactly the jobs that overlap the next hour.
    How long the page took is printed, not asserted (a threshold in milliseconds would measure the machine)."""
    plan, rows = synthetic_plan(2000, time.time())
    with airflow.engine.begin() as conn:
        GpuSchedulerMetadataHook._insert_plan(conn, plan, rows)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    open_review_page(context, airflow)  # logs in through the UI; the timing below is of a fresh load
    page = context.new_page()
    page.goto(airflow.base_url + PREFIX + "/")
    page.wait_for_selector("body[data-ready='1']", timeout=60_000)
    timing = page.evaluate("window.gpuSchedule")
    status, data = get(airflow, "/api/plan")
    assert status == 200 and data["plan"]["run_id"] == "scale"
    jobs = {j["key"]: j for j in data["jobs"]}
    assert timing["jobs"] == len(jobs) == 2000

    drawn = bars(page)
    assert sorted(b["key"] for b in drawn) == sorted(r["job_id"] for r in rows), "one bar per job"
    assert all(b["lane"] == jobs[b["key"]]["lane"] for b in drawn)

    # Why waiting: long queues show their first rows in plan order, and offer the rest.
    held = sorted(
        (j for j in jobs.values() if j["decision"] in ("held", "unplanned", "rejected")),
        key=lambda j: (j["rank"] if j["rank"] is not None else 1e9, j["key"]),
    )
    assert len(held) > 200, "the synthetic plan should hold more jobs than one page of the table"
    listed = page.locator("#waiting tbody tr[data-key]").evaluate_all("rows => rows.map(r => r.dataset.key)")
    assert listed == [j["key"] for j in held[:200]]
    rest = len(held) - 200
    assert page.locator("#more-waiting").inner_text() == f"Show {min(200, rest)} more of {rest}"
    print(
        f"\n2,000 planned jobs: fetch {timing['fetchMs']:.0f} ms, render {timing['renderMs']:.0f} ms, "
        f"painted {timing['paintedMs']:.0f} ms after the data arrived"
    )
    page.screenshot(path=str(ARTIFACTS / "gpu-schedule-2000-jobs.png"), full_page=False)

    # "Next hour" keeps the jobs that overlap [now - 1 h / 8, now + 1 h]: the page's now is its own
    # load's, a few seconds before the API's answer above, hence the minute of slack at each edge.
    page.get_by_role("button", name="Next hour").click()
    soon = {b["key"] for b in bars(page)}

    def overlapping(slack_s: float) -> set[str]:
        lo, hi = data["now_s"] - 3600 / 8 - slack_s, data["now_s"] + 3600 + slack_s
        return {k for k, j in jobs.items() if j["planned_start_s"] < hi and j["expected_end_s"] > lo}

    assert overlapping(-60) <= soon <= overlapping(60), "the window keeps what overlaps the next hour"
    assert 0 < len(soon) < 2000, len(soon)
    page.screenshot(path=str(ARTIFACTS / "gpu-schedule-2000-jobs-next-hour.png"), full_page=False)
    context.close()


def test_a_held_task_instance_shows_its_plan_in_airflows_own_ui(airflow, browser):
    """Data teams look at their DAG, not at the plugin page: the waiting training gang's own page in
    Airflow's UI carries the plan as its note, in the review page's words."""
    from airflow_gpu_scheduler.plan_notes import gpu_count

    status, one = get(airflow, "/api/jobs/plan_train/train/train/-1")
    assert status == 200
    job = one["job"]
    assert job["decision"] in ("released", "held"), job
    context = browser.new_context(viewport={"width": 1600, "height": 700})
    page = context.new_page()
    page.goto(airflow.base_url + "/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", "admin")
    page.click("button[type=submit]")
    page.wait_for_url(airflow.base_url + "/")
    page.goto(airflow.base_url + job["ti_url"])
    note = page.get_by_text("GPU plan: ")
    note.wait_for(timeout=60_000)
    text = note.inner_text()
    gpus = f"{job['gpu_type']} ({gpu_count(job['gpus'])})"
    if job["decision"] == "released":  # released ahead: next in line, it starts when its GPUs free
        assert f"released to {gpus}" in text and "next in line" in text, text
    else:
        assert f"on {gpus}" in text and job["reason"] in text, text
    page.screenshot(path=str(ARTIFACTS / "gpu-plan-note.png"), clip={"x": 0, "y": 0, "width": 1600, "height": 300})
    context.close()
