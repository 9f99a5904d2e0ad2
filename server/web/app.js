// patrdb viewer: reads the JSON API of the server that serves this page.
// No framework and no network beyond this origin.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const state = { run: null, steps: [], step: 0, group: 0, node: 0 };

// A server started with a token is opened as /#token=...; the fragment never
// leaves the browser, and the token goes only into the Authorization header.
function token() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem("patrdb-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname);
  }
  return sessionStorage.getItem("patrdb-token") || "";
}

async function api(path) {
  const headers = {};
  const t = token();
  if (t) headers.Authorization = "Bearer " + t;
  const resp = await fetch("/api/v1" + path, { headers });
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error(body.error || ("HTTP " + resp.status));
  return body;
}

function el(tag, attrs, ...kids) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "text") e.textContent = v;
    else if (k === "on") for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
}

function setStatus(msg, isError) {
  const s = document.getElementById("status");
  s.textContent = msg || "";
  s.className = isError ? "error" : "dim";
}

const fmt = (x, d = 3) => (x === undefined || x === null) ? "" : (Math.round(x * 10 ** d) / 10 ** d).toString();

async function loadRuns() {
  const [health, data] = await Promise.all([api("/health"), api("/runs")]);
  document.getElementById("file").textContent = health.path;
  const ul = document.getElementById("runs");
  ul.replaceChildren();
  for (const r of data.runs) {
    const b = el("button", { "data-run": r.run.id, on: { click: () => selectRun(r.run.id) } },
      r.run.id, el("small", { text: `${r.run.status} · step ${r.run.last_step} · ${r.groups} groups · ${r.nodes} nodes` }));
    ul.append(el("li", {}, b));
  }
  if (data.runs.length === 0) ul.append(el("li", { class: "dim", text: "no runs yet" }));
  const wanted = new URLSearchParams(location.search).get("run");
  const first = data.runs.find(r => r.run.id === wanted) || data.runs[0];
  if (first) await selectRun(first.run.id);
}

async function selectRun(id) {
  state.run = id;
  state.node = 0;
  for (const b of document.querySelectorAll("#runs button")) b.classList.toggle("sel", b.dataset.run === id);
  const enc = encodeURIComponent(id);
  const [sum, steps, rubrics] = await Promise.all([api(`/runs/${enc}`), api(`/runs/${enc}/steps`), api(`/runs/${enc}/rubrics?pool=all`)]);
  document.getElementById("run-panel").hidden = false;
  document.getElementById("run-title").textContent = `run ${id}`;
  document.getElementById("run-summary").textContent =
    `${sum.run.status} · last completed step ${sum.run.last_step} · ${sum.groups} groups (${sum.open_groups} open) · ` +
    `${sum.nodes} nodes · ${sum.turns} turns stored · ${sum.leaves} leaves · ${sum.frontier} active`;
  state.steps = steps.steps;
  drawCharts(steps.steps);
  drawRubrics(rubrics.rubrics);
  const sel = document.getElementById("step");
  sel.replaceChildren(...steps.steps.map(s => el("option", { value: s.step, text: `step ${s.step} (${s.groups} groups)` })));
  document.getElementById("traj").hidden = true;
  if (steps.steps.length) {
    const last = steps.steps[steps.steps.length - 1].step;
    sel.value = last;
    await selectStep(last);
  } else {
    document.getElementById("group").replaceChildren();
    document.getElementById("tree").replaceChildren();
  }
}

async function selectStep(step) {
  state.step = Number(step);
  const data = await api(`/runs/${encodeURIComponent(state.run)}/steps/${state.step}/groups`);
  const sel = document.getElementById("group");
  sel.replaceChildren(...data.groups.map(g => el("option", { value: g.id, text: `group ${g.id} · ${g.task || "task"} · ${g.status}` })));
  if (data.groups.length) {
    sel.value = data.groups[0].id;
    await selectGroup(data.groups[0].id);
  }
}

async function selectGroup(id) {
  state.group = Number(id);
  const data = await api(`/runs/${encodeURIComponent(state.run)}/groups/${state.group}`);
  drawTree(data.group, data.nodes);
}

// ---- charts ----

function lineChart(svg, series, yMax) {
  svg.replaceChildren();
  const W = 360, H = 180, R = 8, T = 22, B = 22;
  const xs = series.flatMap(s => s.points.map(p => p[0]));
  if (xs.length === 0) {
    svg.append(el("svg:text", { x: W / 2, y: H / 2, "text-anchor": "middle", text: "no steps yet" }));
    return;
  }
  const x0 = Math.min(...xs), x1 = Math.max(...xs);
  const ymax = yMax ?? Math.max(1, ...series.flatMap(s => s.points.map(p => p[1])));
  const ymin = Math.min(0, ...series.flatMap(s => s.points.map(p => p[1])));
  // Counts get whole-number ticks; the left margin fits the widest label.
  const tick = i => {
    const v = ymin + (ymax - ymin) * i / 4;
    return ymax - ymin > 4 ? Math.round(v) : v;
  };
  const labels = [0, 1, 2, 3, 4].map(i => fmt(tick(i), 2));
  const L = Math.max(34, 8 + 7 * Math.max(...labels.map(t => String(t).length)));
  const sx = x => L + (x1 === x0 ? (W - L - R) / 2 : (x - x0) / (x1 - x0) * (W - L - R));
  const sy = y => H - B - (y - ymin) / (ymax - ymin || 1) * (H - T - B);
  for (let i = 0; i <= 4; i++) {
    const v = tick(i);
    svg.append(el("svg:line", { class: "grid", x1: L, x2: W - R, y1: sy(v), y2: sy(v) }));
    svg.append(el("svg:text", { x: L - 4, y: sy(v) + 3, "text-anchor": "end", text: labels[i] }));
  }
  svg.append(el("svg:line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  svg.append(el("svg:line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  svg.append(el("svg:text", { x: sx(x0), y: H - 6, "text-anchor": x1 === x0 ? "middle" : "start", text: `step ${x0}` }));
  if (x1 !== x0) svg.append(el("svg:text", { x: sx(x1), y: H - 6, "text-anchor": "end", text: `step ${x1}` }));
  let lx = L;
  for (const s of series) {
    const d = s.points.map((p, i) => `${i ? "L" : "M"}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join("");
    svg.append(el("svg:path", { class: "series", d, stroke: s.color, "data-series": s.name }));
    for (const p of s.points) {
      svg.append(el("svg:circle", { cx: sx(p[0]), cy: sy(p[1]), r: 2.2, fill: s.color },
        el("svg:title", { text: `${s.name} at step ${p[0]}: ${fmt(p[1])}` })));
    }
    svg.append(el("svg:rect", { x: lx, y: 6, width: 10, height: 6, fill: s.color }));
    svg.append(el("svg:text", { x: lx + 13, y: 12, text: s.name }));
    lx += 20 + s.name.length * 5.5;
  }
}

function drawCharts(steps) {
  const closed = steps.filter(s => s.closed_groups > 0);
  lineChart(document.getElementById("chart-reward"), [
    { name: "success", color: "#2e9d57", points: closed.map(s => [s.step, s.success]) },
    { name: "mean reward", color: "#2f7ed8", points: closed.map(s => [s.step, s.mean_reward]) },
  ]);
  lineChart(document.getElementById("chart-zv"), [
    { name: "zero-variance share", color: "#d0453a", points: closed.map(s => [s.step, s.zero_variance_share]) },
    { name: "unlocked share", color: "#8a63d2", points: closed.map(s => [s.step, s.zero_variance_groups ? s.unlocked_groups / s.closed_groups : 0]) },
  ], 1);
  const colors = { candidate: "#d89b22", public: "#2e9d57", retired: "#888", merged: "#8a63d2" };
  lineChart(document.getElementById("chart-pools"), Object.keys(colors).map(p => (
    { name: p, color: colors[p], points: steps.map(s => [s.step, s.pools[p] || 0]) })));
}

// ---- the rollout tree ----
// Each node is drawn as a horizontal span over the turns it stores, from its
// fork point (base) to the end of its path, one row per node in depth-first
// order; an elbow joins it to its parent at the fork point.

function drawTree(group, nodes) {
  const svg = document.getElementById("tree");
  svg.replaceChildren();
  const byId = new Map(nodes.map(n => [n.id, n]));
  const kids = new Map();
  for (const n of nodes) {
    if (n.parent && byId.has(n.parent)) {
      if (!kids.has(n.parent)) kids.set(n.parent, []);
      kids.get(n.parent).push(n);
    }
  }
  const order = [];
  const visit = n => { order.push(n); for (const c of (kids.get(n.id) || []).sort((a, b) => a.ordinal - b.ordinal || a.id - b.id)) visit(c); };
  for (const r of nodes.filter(n => !n.parent || !byId.has(n.parent)).sort((a, b) => a.ordinal - b.ordinal || a.id - b.id)) visit(r);
  const maxLen = Math.max(1, ...nodes.map(n => n.base + n.turns));
  const rowH = 22, L = 60, R = 40, T = 14, step = Math.max(14, Math.min(40, 900 / maxLen));
  const W = L + R + maxLen * step, H = T * 2 + order.length * rowH;
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const row = new Map(order.map((n, i) => [n.id, i]));
  const X = t => L + t * step, Y = n => T + row.get(n.id) * rowH + rowH / 2;
  for (const n of order) {
    const p = byId.get(n.parent);
    if (p) svg.append(el("svg:path", { class: "edge", d: `M${X(n.base)},${Y(p)}V${Y(n)}` }));
  }
  for (const n of order) {
    const y = Y(n), end = n.base + n.turns;
    const last = n.scores && n.scores.length ? n.scores[n.scores.length - 1] : null;
    const dec = n.decisions && n.decisions.length ? n.decisions[n.decisions.length - 1] : null;
    const tip = [`node ${n.id} · ${n.status}`, `turns ${n.turns} (path ${end}, fork ${n.fork} of parent ${n.parent || "-"})`,
      last ? `score ${fmt(last.value)} at turn ${last.turn}` : "no score",
      dec ? `${dec.action} by ${dec.rule} (ref ${fmt(dec.reference)}, delta ${fmt(dec.delta)})` : null,
      n.has_reward ? `reward ${fmt(n.reward)}` : null].filter(Boolean).join("\n");
    const g = el("svg:g", { class: "node", "data-node": n.id, "data-status": n.status, on: { click: () => selectNode(n.id) } },
      el("svg:title", { text: tip }),
      el("svg:line", { class: "span", x1: X(n.base), x2: X(end), y1: y, y2: y }),
      el("svg:circle", { class: n.status, cx: X(end), cy: y, r: 6 }),
      el("svg:text", { x: X(end) + 9, y: y + 3, text: last ? fmt(last.value, 2) : "" }));
    svg.append(g);
    if (!n.parent) svg.append(el("svg:text", { x: 4, y: y + 3, text: `root ${n.ordinal}` }));
  }
}

async function selectNode(id) {
  state.node = id;
  for (const g of document.querySelectorAll("#tree .node")) g.classList.toggle("sel", Number(g.dataset.node) === id);
  const t = await api(`/runs/${encodeURIComponent(state.run)}/nodes/${id}/trajectory`);
  const panel = document.getElementById("traj");
  panel.hidden = false;
  document.getElementById("traj-title").textContent = `Trajectory of node ${id}: ${t.turns.length} turns, ${t.inherited} inherited`;
  const n = t.node;
  document.getElementById("traj-node").textContent =
    `${n.status}${n.has_reward ? " · reward " + fmt(n.reward) : ""} · depth ${n.depth} · path: ` +
    t.segments.map(s => `node ${s.node} ×${s.count}`).join(" → ");
  const ol = document.getElementById("traj-turns");
  ol.replaceChildren();
  t.turns.forEach((turn, i) => {
    if (i === t.inherited && t.inherited > 0) ol.append(el("li", { class: "prefix-end", text: `inherited prefix ends: ${t.inherited} turns from ancestors, then node ${id}'s own` }));
    const inherited = i < t.inherited;
    ol.append(el("li", { class: "turn" + (inherited ? " inherited" : " own"), value: i + 1, "data-node": turn.node, "data-index": turn.index },
      el("span", { class: "act", text: turn.action }), " → ", el("span", { class: "obs", text: turn.observation }),
      turn.reward ? el("span", { class: "dim", text: ` (reward ${fmt(turn.reward)})` }) : null,
      turn.done ? el("span", { class: "dim", text: " [done]" }) : null));
  });
}

// ---- rubric pools ----

function drawRubrics(rubrics) {
  const tb = document.querySelector("#rubrics tbody");
  tb.replaceChildren();
  if (!rubrics.length) {
    tb.append(el("tr", {}, el("td", { colspan: 10, class: "dim", text: "no rubrics in this run" })));
    return;
  }
  const order = { public: 0, candidate: 1, retired: 2, merged: 3 };
  rubrics.sort((a, b) => order[a.pool] - order[b.pool] || a.id - b.id);
  for (const r of rubrics) {
    const u = r.usage || {};
    tb.append(el("tr", { "data-pool": r.pool },
      el("td", { class: "num", text: r.id }), el("td", { text: r.pool }), el("td", { text: r.text }),
      el("td", { class: "num", text: r.support }), el("td", { class: "num", text: u.activations }),
      el("td", { class: "num", text: u.last_activation >= 0 ? u.last_activation : "-" }),
      el("td", { class: "num", text: u.low_var_streak }), el("td", { class: "num", text: u.pairs_judged }),
      el("td", { class: "num", text: u.groups_unlocked }),
      el("td", { text: r.retire_reason ? `step ${r.retire_step}: ${r.retire_reason}` : (r.merged_into ? `merged into ${r.merged_into}` : "") })));
  }
}

function guard(fn) {
  return async (...args) => {
    try { setStatus("loading…"); await fn(...args); setStatus(""); } catch (e) { setStatus(e.message, true); }
  };
}

selectRun = guard(selectRun);
selectStep = guard(selectStep);
selectGroup = guard(selectGroup);
selectNode = guard(selectNode);

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("step").addEventListener("change", e => selectStep(e.target.value));
  document.getElementById("group").addEventListener("change", e => selectGroup(e.target.value));
  guard(loadRuns)();
});
