// GPU Schedule review page: reads the plugin's JSON API and draws the plan (SVG), the wait
// reasons, the plan's quality and the history. No dependencies, no external resources.
(function () {
  "use strict";

  var API = "api/";
  var SVG_NS = "http://www.w3.org/2000/svg";
  var KINDS = {
    training: "Training", realtime_inference: "Real-time inference",
    batch_inference: "Batch inference", quantization: "Quantization"
  };
  // The decision and method vocabulary of airflow_gpu_scheduler/db/records.py (Decision, Method).
  var DECISIONS = { released: "released", held: "held", unplanned: "not placed", rejected: "rejected", running: "running" };
  // "Held" everywhere (cards, history, the API's plan.held): kept in gpu_intake by the plan; rejected apart.
  var HELD = { held: true, unplanned: true };
  var METHODS = {
    milp: "MILP (Pyomo + HiGHS)", "milp-windows": "MILP by time windows (Pyomo + HiGHS)",
    greedy: "Greedy (no solver answer in time)", empty: "Nothing to place",
    fail_open: "Fail-open: Airflow's own order (planner down)"
  };
  function heldCount(counts) {
    return Object.keys(HELD).reduce(function (n, d) { return n + (counts[d] || 0); }, 0);
  }
  var TYPE_COLORS = ["var(--training)", "var(--batch_inference)", "var(--quantization)", "var(--realtime_inference)"];
  var WAITING_PAGE = 200;
  var state = { data: null, jobs: [], selected: null, timer: null, window: null, waitingRows: WAITING_PAGE };

  // ------------------------------------------------------------------ formatting
  function $(id) { return document.getElementById(id); }
  function esc(value) {
    return String(value == null ? "" : value).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function clock(t, withSeconds) {
    if (t == null) return "–";
    var iso = new Date(t * 1000).toISOString();
    return iso.slice(11, withSeconds === false ? 16 : 19);
  }
  function duration(s) {
    if (s == null || !isFinite(s)) return "–";
    s = Math.abs(s);
    if (s < 90) return Math.round(s) + " s";
    if (s < 5400) return Math.round(s / 60) + " min";
    var h = Math.floor(s / 3600), m = Math.round((s % 3600) / 60);
    return h + " h" + (m ? " " + m + " min" : "");
  }
  function relative(t, now) {
    if (t == null) return "";
    var d = t - now;
    return Math.abs(d) < 1 ? "now" : d > 0 ? "in " + duration(d) : duration(d) + " ago";
  }
  function pct(x, digits) { return x == null || !isFinite(x) ? "–" : (100 * x).toFixed(digits == null ? 1 : digits) + " %"; }
  function num(x) {
    if (x == null || !isFinite(x)) return "–";
    var a = Math.abs(x);
    return a >= 1e6 ? (x / 1e6).toFixed(2) + " M" : a >= 1e4 ? (x / 1e3).toFixed(1) + " k" : (+x.toFixed(2)).toString();
  }
  function jobName(j) {
    if (j.hidden) return j.task_id;
    return j.dag_id + " / " + j.task_id + (j.map_index != null && j.map_index >= 0 ? " [" + j.map_index + "]" : "");
  }
  function kindBadge(kind) {
    return kind ? '<span class="badge kind" style="background:var(--' + esc(kind) + ')">' + esc(KINDS[kind] || kind) + "</span>" : "–";
  }
  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG_NS, name);
    for (var k in attrs) node.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(node);
    return node;
  }

  // ------------------------------------------------------------------ theme (follows the Airflow UI)
  // Defined in the page's <head> so the theme is set before the first paint; one rule for both.
  function applyTheme() {
    window.gpuScheduleApplyTheme();
  }
  function watchTheme() {
    try {
      if (window.parent !== window) {
        new MutationObserver(applyTheme).observe(window.parent.document.documentElement,
          { attributes: true, attributeFilter: ["class", "style"] });
      }
    } catch (e) {}
    window.addEventListener("storage", applyTheme);
    if (window.matchMedia) matchMedia("(prefers-color-scheme: dark)").addEventListener("change", applyTheme);
  }

  // ------------------------------------------------------------------ data
  function getJSON(path) {
    return fetch(API + path, { credentials: "same-origin", headers: { Accept: "application/json" } }).then(function (r) {
      if (!r.ok) {
        var hint = r.status === 401 ? " (not logged in: open this page from the Airflow UI)" :
          r.status === 403 ? " (your Airflow role may not read pools and task instances)" : "";
        throw new Error("GET " + path + " answered " + r.status + " " + r.statusText + hint);
      }
      return r.json();
    });
  }

  function load() {
    var t0 = performance.now();
    return Promise.all([getJSON("plan"), getJSON("plans?limit=20"), getJSON("utilization?hours=6")])
      .then(function (answers) {
        var t1 = performance.now();
        render(answers[0], answers[1], answers[2]);
        document.body.getBoundingClientRect(); // force layout: it is part of rendering
        var t2 = performance.now();
        var timing = { fetchMs: t1 - t0, renderMs: t2 - t1, jobs: answers[0].jobs.length, parts: state.parts };
        window.gpuSchedule = timing;
        requestAnimationFrame(function () {
          requestAnimationFrame(function () {
            timing.paintedMs = performance.now() - t1;
            document.body.dataset.ready = "1";
          });
        });
      })
      .catch(function (error) {
        $("error").hidden = false;
        $("error").textContent = "Could not load the schedule: " + error.message;
        document.body.dataset.ready = "error";
      });
  }

  function render(data, history, usage) {
    state.data = data;
    $("error").hidden = true;
    if (!data.plan) {
      $("empty").hidden = false;
      $("content").hidden = true;
      $("plan-meta").textContent = "No plan yet.";
      return;
    }
    $("empty").hidden = true;
    $("content").hidden = false;
    var p = data.plan;
    $("plan-meta").innerHTML = "Plan #" + p.id + " made at " + clock(p.created_s) + " UTC (" +
      esc(relative(p.created_s, data.now_s)) + ")" + (p.dag_id ? " by " + esc(p.dag_id) + " / " + esc(p.run_id) : "") +
      // A plan is stored only when its decisions change; cycles in between confirm it (the heartbeat).
      (p.checked_s != null && p.checked_s > p.created_s ? " · still current at " + clock(p.checked_s) + " UTC (" +
        esc(relative(p.checked_s, data.now_s)) + ")" : "") +
      " · " + esc(p.method.toUpperCase()) + " " + esc(p.status) + " · times in UTC";
    var parts = {}, mark = performance.now();
    function step(name, fn) { fn(); var t = performance.now(); parts[name] = t - mark; mark = t; }
    step("stats", function () { renderStats(data); });
    step("gantt", function () { renderGantt(data); });
    step("waiting", function () { renderWaiting(data); });
    step("quality", function () { renderQuality(p); });
    step("usage", function () { renderUsage(usage); });
    step("history", function () { renderHistory(history.plans); });
    state.parts = parts;
    if (state.selected) {
      var again = data.jobs.filter(function (j) { return j.key === state.selected; })[0];
      if (again) showDetails(again); else $("details").hidden = true;
    }
  }

  // ------------------------------------------------------------------ stats
  function renderStats(data) {
    var p = data.plan, counts = { released: 0, held: 0, unplanned: 0, rejected: 0, running: 0 };
    data.jobs.forEach(function (j) { counts[j.decision] = (counts[j.decision] || 0) + 1; });
    var pred = p.predicted && p.predicted.plan ? p.predicted : null;
    var cards = [
      ["Waiting", p.waiting, "scheduled GPU task instances"],
      ["Released now", counts.released, "moved to a GPU pool"],
      ["Held", heldCount(counts), "waiting in gpu_intake"],
      ["Running", counts.running, "holding GPUs"],
      ["Rejected", counts.rejected, "can never run as declared"],
      ["Solver", p.status, p.method.toUpperCase() + " in " + (p.wall_s != null ? p.wall_s.toFixed(2) + " s" : "–") +
        ", gap " + pct(p.gap, 2)],
      ["Predicted utilization", pred ? pct(pred.plan.utilization) : "–",
        pred ? "next " + duration(pred.window_s) + "; Airflow alone " + pct(pred.airflow.utilization) : "no forecast"]
    ];
    $("stats").innerHTML = cards.map(function (c) {
      return '<div class="stat"><div class="label">' + esc(c[0]) + '</div><div class="value">' + esc(c[1]) +
        '</div><div class="sub">' + esc(c[2]) + "</div></div>";
    }).join("");
  }

  // ------------------------------------------------------------------ Gantt
  function niceStep(span, px) {
    var steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
    var target = span / Math.max(1, px / 110);
    for (var i = 0; i < steps.length; i++) if (steps[i] >= target) return steps[i];
    return steps[steps.length - 1];
  }

  function layoutLane(lane, jobs) {
    // Each job takes `gpus` adjacent rows of its lane for its time span (first fit); a lane
    // grows extra rows only if running work exceeds what the plan expected.
    var rows = Math.max(1, lane.gpus), rowEnd = [];
    for (var r = 0; r < rows; r++) rowEnd.push(-Infinity);
    jobs.sort(function (a, b) { return a.planned_start_s - b.planned_start_s || (a.rank || 0) - (b.rank || 0); });
    jobs.forEach(function (j) {
      var g = Math.max(1, j.gpus || 1), start = j.planned_start_s + 1e-6, found = -1;
      for (var r0 = 0; r0 + g <= rowEnd.length && found < 0; r0++) {
        var ok = true;
        for (var k = r0; k < r0 + g; k++) if (rowEnd[k] > start) { ok = false; break; }
        if (ok) found = r0;
      }
      if (found < 0) { found = rowEnd.length; for (var n = 0; n < g; n++) rowEnd.push(-Infinity); }
      for (var m = found; m < found + g; m++) rowEnd[m] = j.expected_end_s;
      j._row = found;
    });
    return rowEnd.length;
  }

  function renderGantt(data) {
    var box = $("gantt");
    box.textContent = "";
    var now = data.now_s, plan = data.plan;
    var jobs = data.jobs.filter(function (j) { return j.lane && j.planned_start_s != null && j.expected_end_s != null; });
    state.jobs = jobs;
    var lo = Math.min(now, plan.created_s), hi = lo;
    for (var i = 0; i < jobs.length; i++) {
      if (jobs[i].planned_start_s < lo) lo = jobs[i].planned_start_s;
      if (jobs[i].expected_end_s > hi) hi = jobs[i].expected_end_s;
    }
    hi = Math.max(hi, now + 0.1 * Math.max(60, hi - lo));
    if (state.window) {
      // A window shows what starts soon: from just before now (running work) to now + window.
      lo = Math.max(lo, now - state.window / 8);
      hi = now + state.window;
      jobs = jobs.filter(function (j) { return j.planned_start_s < hi && j.expected_end_s > lo; });
    }
    var pad = (hi - lo) * 0.02; lo -= pad; hi += pad;

    var byLane = {};
    data.lanes.forEach(function (l) { byLane[l.id] = []; });
    jobs.forEach(function (j) {
      if (!byLane[j.lane]) { byLane[j.lane] = []; data.lanes.push({ id: j.lane, gpu_type: j.gpu_type, gpus: 0, streaming: false }); }
      byLane[j.lane].push(j);
    });
    var labelW = 160, axisH = 24, width = Math.max(720, box.clientWidth || 960), plotW = width - labelW - 12;
    var x = function (t) { return labelW + (t - lo) / (hi - lo) * plotW; };
    var lanes = data.lanes.map(function (lane) {
      var rows = layoutLane(lane, byLane[lane.id] || []);
      var rowPx = Math.max(2, Math.min(16, Math.floor(200 / rows)));
      var minHeight = !lane.streaming && lane.speed && lane.speed !== 1 ? 56 : 44;
      return { lane: lane, rows: rows, rowPx: rowPx, height: Math.max(minHeight, rows * rowPx + 10) };
    });
    var height = axisH + lanes.reduce(function (s, l) { return s + l.height; }, 0) + 4;
    var svg = el("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height, role: "img" });
    var defs = el("defs", {}, svg);
    Object.keys(KINDS).forEach(function (kind) {
      var pat = el("pattern", { id: "run-" + kind, width: 6, height: 6, patternUnits: "userSpaceOnUse",
        patternTransform: "rotate(45)" }, defs);
      el("rect", { width: 6, height: 6, style: "fill:var(--" + kind + ")" }, pat);
      el("rect", { width: 2.5, height: 6, style: "fill:#fff;opacity:.45" }, pat);
    });

    // lanes, grid, axis
    var y = axisH, step = niceStep(hi - lo, plotW), first = Math.ceil(lo / step) * step;
    lanes.forEach(function (l, idx) {
      l.y = y;
      if (idx % 2 === 0) el("rect", { class: "lane-bg", x: 0, y: y, width: width, height: l.height }, svg);
      el("line", { class: "lane-sep", x1: 0, x2: width, y1: y, y2: y }, svg);
      var name = el("text", { class: "lane-label", x: 8, y: y + 17 }, svg);
      name.textContent = l.lane.streaming ? l.lane.gpu_type + " · streaming" : l.lane.gpu_type;
      var sub = el("text", { class: "lane-sub", x: 8, y: y + 32 }, svg);
      var kept = (l.lane.count || l.lane.gpus) - l.lane.gpus;
      sub.textContent = l.lane.streaming ? l.lane.gpus + " GPUs reserved" : (l.lane.count || l.lane.gpus) + " GPUs" +
        (kept > 0 ? ", " + kept + " streaming" : "");
      if (!l.lane.streaming && l.lane.speed && l.lane.speed !== 1) {
        el("text", { class: "lane-sub", x: 8, y: y + 46 }, svg).textContent = "speed " + l.lane.speed;
      }
      if (l.lane.streaming && l.lane.gpus > 0) {
        el("rect", { class: "reserve", x: labelW, y: y + 5, width: plotW, height: Math.min(l.rows, l.lane.gpus) * l.rowPx }, svg);
      }
      y += l.height;
    });
    el("line", { class: "lane-sep", x1: 0, x2: width, y1: y, y2: y }, svg);
    for (var t = first; t <= hi; t += step) {
      var tx = x(t);
      el("line", { class: "gridline", x1: tx, x2: tx, y1: axisH - 4, y2: y }, svg);
      var label = el("text", { class: "tick", x: tx + 3, y: 14 }, svg);
      label.textContent = clock(t, step < 60);
    }

    // bars: one <rect> each, events delegated to the <svg>
    var frag = document.createDocumentFragment();
    lanes.forEach(function (l) {
      (byLane[l.lane.id] || []).forEach(function (j) {
        var x0 = Math.max(labelW, x(j.planned_start_s)), w = Math.max(2, Math.min(x(j.expected_end_s), labelW + plotW) - x0);
        var h = Math.max(2, Math.max(1, j.gpus || 1) * l.rowPx - 1), by = l.y + 5 + j._row * l.rowPx;
        var kind = KINDS[j.kind] ? j.kind : "hidden";
        var attrs = { class: "bar " + j.decision + (j.key === state.selected ? " selected" : ""), x: x0.toFixed(1),
          y: by, width: w.toFixed(1), height: h, "data-key": j.key, "data-lane": j.lane, "data-start": j.planned_start_s,
          style: "fill:" + (j.decision === "running" && kind !== "hidden" ? "url(#run-" + kind + ")" : "var(--" + kind + ")") };
        frag.appendChild(el("rect", attrs));
        if (w > 56 && h >= 11) {
          var text = el("text", { class: "bar-label", x: x0 + 4, y: by + Math.min(h, 14) - 3.5 });
          var name = j.hidden ? "hidden" : j.task_id + (j.map_index >= 0 ? "[" + j.map_index + "]" : "");
          var fit = Math.floor((w - 8) / 6);
          text.textContent = name.length > fit ? name.slice(0, Math.max(1, fit - 1)) + "…" : name;
          frag.appendChild(text);
        }
      });
    });
    svg.appendChild(frag);

    if (Math.abs(x(plan.created_s) - x(now)) > 3) {
      var px = x(plan.created_s);
      el("line", { class: "plan-time", x1: px, x2: px, y1: axisH - 4, y2: y }, svg);
    }
    var nx = x(now);
    el("line", { class: "now", x1: nx, x2: nx, y1: axisH - 6, y2: y }, svg);
    var nl = el("text", { class: "now-label", x: nx + 4, y: axisH - 8 + 4 }, svg);
    nl.textContent = "now";
    box.appendChild(svg);

    var index = {};
    jobs.forEach(function (j) { index[j.key] = j; });
    svg.addEventListener("mousemove", function (event) {
      var key = event.target.getAttribute && event.target.getAttribute("data-key");
      if (key && index[key]) showTooltip(index[key], event); else hideTooltip();
    });
    svg.addEventListener("mouseleave", hideTooltip);
    svg.addEventListener("click", function (event) {
      var key = event.target.getAttribute && event.target.getAttribute("data-key");
      if (!key || !index[key]) return;
      state.selected = key;
      var old = svg.querySelector(".bar.selected");
      if (old) old.classList.remove("selected");
      event.target.classList.add("selected");
      showDetails(index[key]);
    });
    renderLegend();
  }

  function renderLegend() {
    var items = Object.keys(KINDS).map(function (k) {
      return '<span><span class="sw" style="background:var(--' + k + ')"></span>' + KINDS[k] + "</span>";
    });
    items.push('<span><span class="sw" style="background:repeating-linear-gradient(45deg,var(--muted) 0 3px,transparent 3px 6px)"></span>running</span>');
    items.push('<span><span class="sw" style="background:var(--muted);opacity:.5"></span>held</span>');
    items.push('<span><span class="sw" style="background:var(--now);width:3px"></span>now</span>');
    $("legend").innerHTML = items.join("");
  }

  function jobFacts(j, now) {
    var rows = [
      ["Job", j.hidden ? j.task_id : '<a href="' + esc(j.ti_url) + '" target="_top">' + esc(jobName(j)) + "</a>"],
      ["Run", esc(j.run_id || "–")],
      ["Decision", esc(DECISIONS[j.decision] || j.decision)],
      ["Kind", kindBadge(j.kind)],
      ["GPUs", esc(j.gpus) + " × " + esc(j.gpu_type || "–")],
      ["Priority", esc(j.priority == null ? "–" : j.priority)],
      ["Estimate", duration(j.estimate_s) + (j.estimate_source ? " (" + esc(j.estimate_source) + ")" : "")],
      [j.decision === "running" ? "Started" : "Planned start", j.planned_start_s == null ? "–" :
        clock(j.planned_start_s) + " (" + esc(relative(j.planned_start_s, now)) + ")"],
      ["Expected end", clock(j.expected_end_s)],
      ["Pool", esc(j.pool || "–")],
      ["Priority weight", esc(j.priority_weight == null ? "–" : j.priority_weight)],
      ["Deadline", j.deadline_s == null ? "none" : clock(j.deadline_s) + " · " +
        (j.deadline_met ? '<span class="ok">met</span>' : j.deadline_met === false ? '<span class="bad">missed</span>' : "–")]
    ];
    if (j.reason) rows.push(["Why waiting", esc(j.reason)]);
    return '<dl class="kv">' + rows.map(function (r) { return "<dt>" + r[0] + "</dt><dd>" + r[1] + "</dd>"; }).join("") + "</dl>";
  }

  function showTooltip(j, event) {
    var tip = $("tooltip");
    tip.innerHTML = jobFacts(j, state.data.now_s);
    tip.hidden = false;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    var left = Math.min(event.clientX + 14, window.innerWidth - w - 8);
    var top = event.clientY + 14 + h > window.innerHeight ? event.clientY - h - 10 : event.clientY + 14;
    tip.style.left = Math.max(4, left) + "px";
    tip.style.top = Math.max(4, top) + "px";
  }
  function hideTooltip() { $("tooltip").hidden = true; }

  function showDetails(j) {
    var box = $("details");
    box.hidden = false;
    box.innerHTML = "<h3>" + esc(jobName(j)) + "</h3>" + jobFacts(j, state.data.now_s) +
      (j.hidden ? "" : '<p class="muted" id="job-history">Loading this job\'s history…</p>');
    if (j.hidden) return;
    getJSON("jobs/" + j.key.split("/").map(encodeURIComponent).join("/")).then(function (answer) {
      var target = $("job-history");
      if (!target) return;
      target.innerHTML = "History over the last plans: " + answer.history.map(function (h) {
        return "#" + h.plan_id + " " + clock(h.created_s) + " " + esc(DECISIONS[h.decision] || h.decision);
      }).join(" · ");
    }).catch(function (e) { var t = $("job-history"); if (t) t.textContent = e.message; });
  }

  // ------------------------------------------------------------------ why waiting
  function renderWaiting(data) {
    // Every job that waits in gpu_intake, rejected ones too (they wait for a fixed declaration).
    var held = data.jobs.filter(function (j) { return HELD[j.decision] || j.decision === "rejected"; });
    held.sort(function (a, b) {
      var ra = a.rank == null ? 1e9 : a.rank, rb = b.rank == null ? 1e9 : b.rank;
      return ra - rb || (a.key < b.key ? -1 : 1);
    });
    var head = "<thead><tr><th>Job</th><th>Kind</th><th class=num>GPUs</th><th class=num>Priority</th>" +
      "<th>Planned start</th><th>Why it waits</th></tr></thead>";
    var filter = ($("filter").value || "").toLowerCase();
    var matching = held.filter(function (j) {
      return !filter || (jobName(j) + " " + (j.run_id || "") + " " + (j.reason || "")).toLowerCase().indexOf(filter) >= 0;
    });
    // Long queues: the first rows in plan order, more on request (the filter searches them all).
    var shown = matching.slice(0, state.waitingRows);
    var rows = shown.map(function (j) {
      var name = j.hidden ? esc(j.task_id) : '<a href="' + esc(j.ti_url) + '" target="_top">' + esc(jobName(j)) + "</a>" +
        '<div class="muted">' + esc(j.run_id) + "</div>";
      return '<tr data-key="' + esc(j.key) + '" data-code="' + esc(j.reason_code || "") + '"><td>' + name + "</td><td>" +
        kindBadge(j.kind) + '</td><td class="num">' + esc(j.gpus) + '</td><td class="num">' + esc(j.priority == null ? "–" : j.priority) +
        "</td><td>" + (j.planned_start_s == null ? "–" : clock(j.planned_start_s) + " on " + esc(j.gpu_type)) +
        '</td><td class="reason">' + esc(j.reason || (j.decision === "held" ? "held by the plan" : "–")) + "</td></tr>";
    });
    $("waiting").innerHTML = head + "<tbody>" + (rows.length ? rows.join("") :
      '<tr><td colspan="6" class="muted">' + (held.length ? "No held job matches the filter." :
        "No job is held: everything waiting was released to a GPU pool.") + "</td></tr>") +
      (matching.length > shown.length ? '<tr><td colspan="6"><button type="button" id="more-waiting">Show ' +
        Math.min(WAITING_PAGE, matching.length - shown.length) + " more of " + (matching.length - shown.length) +
        "</button></td></tr>" : "") + "</tbody>";
  }

  // ------------------------------------------------------------------ quality
  function compareRow(label, plan, airflow, format, max) {
    var scale = max || Math.max(plan || 0, airflow || 0, 1e-9);
    var bar = function (v, cls) {
      return '<div class="track"><div class="fill" style="width:' + Math.min(100, 100 * (v || 0) / scale).toFixed(1) +
        "%;background:var(--" + cls + ')"></div></div>';
    };
    return "<div>" + label + " · plan</div>" + bar(plan, "plan") + "<div>" + format(plan) + "</div>" +
      '<div class="muted">Airflow alone</div>' + bar(airflow, "airflow") + '<div class="muted">' + format(airflow) + "</div>";
  }

  function renderQuality(p) {
    var gain = p.greedy_objective ? (p.objective / p.greedy_objective - 1) : null;
    var rows = [
      ["Method", esc(METHODS[p.method] || p.method)],
      ["Solver status", esc(p.status)],
      ["Solve time", p.wall_s == null ? "–" : p.wall_s.toFixed(3) + " s"],
      ["MIP gap", pct(p.gap, 2)],
      ["Bound", num(p.bound)],
      // The planner's objective against its own greedy warm start: never below it by construction,
      // so it says how much the solver added, not how the plan compares with Airflow (the forecast does).
      ["Objective", num(p.objective) + (gain != null && isFinite(gain) ? ' <span class="muted">(' + (gain >= 0 ? "+" : "") +
        pct(gain, 2) + " over the planner's own greedy start; vs Airflow: see the forecast)</span>" : "")]
    ];
    if (p.message) rows.push(["Note", esc(p.message)]);
    var html = '<dl class="kv">' + rows.map(function (r) { return "<dt>" + r[0] + "</dt><dd>" + r[1] + "</dd>"; }).join("") + "</dl>";
    var pred = p.predicted;
    if (pred && pred.plan && pred.airflow) {
      var out = pred.airflow.weighted_output ? pred.plan.weighted_output / pred.airflow.weighted_output - 1 : null;
      html += '<h2 style="margin-top:14px">Predicted over the next ' + duration(pred.window_s) +
        " vs Airflow's default dispatch of the same queue</h2>" +
        '<div class="compare">' +
        compareRow("Utilization", pred.plan.utilization, pred.airflow.utilization, function (v) { return pct(v); }, 1) +
        compareRow("Weighted output", pred.plan.weighted_output, pred.airflow.weighted_output, num) + "</div>" +
        '<p class="muted">Weighted output ' + (out == null ? "–" : (out >= 0 ? "+" : "") + pct(out)) +
        "; longest wait " + duration(pred.plan.max_wait_s) + " (Airflow alone " + duration(pred.airflow.max_wait_s) +
        "). Simulated on estimates, without new arrivals.</p>";
    } else if (pred && pred.error) {
      html += '<p class="muted">No forecast: ' + esc(pred.error) + "</p>";
    }
    $("quality").innerHTML = html;
  }

  // ------------------------------------------------------------------ history
  function renderUsage(usage) {
    var box = $("utilization");
    var buckets = usage.buckets || [];
    if (!buckets.length) { box.innerHTML = '<p class="muted">No GPU task has run in the last hours.</p>'; return; }
    var width = Math.max(320, box.clientWidth || 480), height = 180, left = 38, bottom = 20, top = 8;
    var x0 = usage.since_s, x1 = usage.until_s;
    var x = function (t) { return left + (t - x0) / (x1 - x0) * (width - left - 8); };
    var y = function (v) { return top + (1 - Math.min(1, v)) * (height - top - bottom); };
    var svg = el("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height, role: "img",
      "aria-label": "Realized GPU utilization" });
    [0, 0.5, 1].forEach(function (v) {
      el("line", { class: "axis", x1: left, x2: width - 8, y1: y(v), y2: y(v) }, svg);
      el("text", { x: 2, y: y(v) + 4 }, svg).textContent = (v * 100) + " %";
    });
    var pts = buckets.map(function (b) { return [x((b.start_s + b.end_s) / 2), y(b.utilization)]; });
    var line = pts.map(function (p, i) { return (i ? "L" : "M") + p[0].toFixed(1) + " " + p[1].toFixed(1); }).join(" ");
    el("path", { class: "area", d: line + " L" + pts[pts.length - 1][0].toFixed(1) + " " + y(0) + " L" + pts[0][0].toFixed(1) + " " + y(0) + " Z" }, svg);
    el("path", { class: "line", d: line }, svg);
    var types = Object.keys(usage.capacity || {});
    if (types.length > 1) {
      types.forEach(function (name, i) {
        var d = buckets.map(function (b, k) {
          return (k ? "L" : "M") + x((b.start_s + b.end_s) / 2).toFixed(1) + " " + y(b.by_type[name] || 0).toFixed(1);
        }).join(" ");
        el("path", { d: d, style: "fill:none;stroke-width:1;stroke-dasharray:4 3;stroke:" + TYPE_COLORS[(i + 1) % 4] }, svg);
      });
    }
    el("text", { x: left, y: height - 4 }, svg).textContent = clock(x0, false);
    var end = el("text", { x: width - 8, y: height - 4, "text-anchor": "end" }, svg);
    end.textContent = clock(x1, false) + " UTC";
    var busy = buckets.reduce(function (s, b) { return s + b.utilization * (b.end_s - b.start_s); }, 0) / (x1 - x0);
    box.innerHTML = "";
    box.appendChild(svg);
    var note = document.createElement("p");
    note.className = "muted";
    note.innerHTML = "GPU pools busy " + pct(busy) + " over the last " + duration(x1 - x0) + " (buckets of " +
      duration(usage.bucket_s) + "), from task instances' start and end times" +
      (types.length > 1 ? "; dashed: " + types.map(function (n, i) {
        return '<span style="color:' + TYPE_COLORS[(i + 1) % 4] + '">' + esc(n) + "</span>";
      }).join(", ") : "") + ".";
    box.appendChild(note);
  }

  function renderHistory(plans) {
    var head = "<thead><tr><th>Plan</th><th>Made at</th><th>Solver</th><th class=num>Waiting</th><th class=num>Released</th>" +
      "<th class=num>Held</th><th class=num>Running</th><th class=num>Rejected</th><th class=num>Moved</th><th>Pool slots written</th></tr></thead>";
    var rows = plans.map(function (p) {
      var d = p.decisions || {};
      var slots = Object.keys(p.pool_slots || {}).filter(function (k) { return k !== "gpu_intake"; })
        .map(function (k) { return esc(k) + "=" + esc(p.pool_slots[k]); }).join(", ");
      return "<tr><td>#" + p.id + "</td><td>" + clock(p.created_s) + "</td><td>" + esc(p.method) + " · " + esc(p.status) +
        (p.wall_s != null ? " · " + p.wall_s.toFixed(2) + " s" : "") + '</td><td class="num">' + p.waiting +
        '</td><td class="num">' + (d.released || 0) + '</td><td class="num">' + heldCount(d) +
        '</td><td class="num">' + (d.running || 0) + '</td><td class="num">' + (d.rejected || 0) + '</td><td class="num">' +
        (p.moved == null ? "–" : p.moved) + "</td><td>" + (slots || "–") + "</td></tr>";
    });
    $("history").innerHTML = head + "<tbody>" + rows.join("") + "</tbody>";
  }

  // ------------------------------------------------------------------ wiring
  applyTheme();
  watchTheme();
  $("refresh").addEventListener("click", load);
  $("window").addEventListener("click", function (event) {
    var button = event.target.closest("button");
    if (!button) return;
    state.window = +button.dataset.window || null;
    Array.prototype.forEach.call(this.querySelectorAll("button"), function (b) { b.classList.toggle("active", b === button); });
    if (state.data && state.data.plan) renderGantt(state.data);
  });
  $("filter").addEventListener("input", function () { if (state.data && state.data.plan) renderWaiting(state.data); });
  $("waiting").addEventListener("click", function (event) {
    if (event.target.id !== "more-waiting") return;
    state.waitingRows += WAITING_PAGE;
    renderWaiting(state.data);
  });
  $("auto-refresh").addEventListener("change", function (event) {
    clearInterval(state.timer);
    if (event.target.checked) state.timer = setInterval(load, 30000);
  });
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () { if (state.data && state.data.plan) renderGantt(state.data); }, 150);
  });
  load();
})();
