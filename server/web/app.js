// patrdb viewer: reads the JSON API of the server that serves this page.
// No framework and no network beyond this origin. Every figure shown is
// computed by the server's library; this script fetches and draws.
// The page's place (run, step, group, node, compared runs) lives in the
// URL, so a link, a reload and the back button all land in the same place.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const state = { run: null, runs: [], listed: false, steps: [], env: [], scalars: null, step: 0, group: 0, node: 0, compare: [], events: 0 };

// ---- token ----
// A server started with a token is opened as /#token=...; the fragment never
// leaves the browser, and the token goes only into the Authorization header.
// Without one, a 401 asks for it.
function token() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem("patrdb-token", decodeURIComponent(m[1]));
    history.replaceState(history.state, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("patrdb-token") || "";
}

class Unauthorized extends Error {}

async function api(path) {
  const headers = {};
  const t = token();
  if (t) headers.Authorization = "Bearer " + t;
  const resp = await fetch("/api/v1" + path, { headers });
  const body = await resp.json().catch(() => ({}));
  if (resp.status === 401) throw new Unauthorized(body.error || "token needed");
  if (!resp.ok) throw new Error(body.error || ("HTTP " + resp.status));
  return body;
}

// Requests a page load is sure to make start before the run list arrives;
// take hands such a request's promise to the code that needs it.
const early = new Map();
function prefetch(path) { if (!early.has(path)) early.set(path, api(path).catch(e => e)); }
async function take(path) {
  const p = early.get(path);
  if (!p) return api(path);
  early.delete(path);
  const v = await p;
  if (v instanceof Error) throw v;
  return v;
}

function askToken(hadOne) {
  const f = $("token-form");
  f.hidden = false;
  $("token-error").textContent = hadOne ? "that token was refused; try again" : "";
  $("token-input").focus();
}

// ---- small helpers ----
const $ = id => document.getElementById(id);
const enc = encodeURIComponent;

function el(tag, attrs, ...kids) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") e.textContent = v;
    else if (k === "on") for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined && k !== false) e.append(k);
  return e;
}

function setStatus(msg, isError) {
  const s = $("status");
  s.textContent = msg || "";
  s.className = isError ? "error" : "dim";
}

const fmt = (x, d = 3) => (x === undefined || x === null) ? "–" : (Math.round(x * 10 ** d) / 10 ** d).toString();

function guard(fn) {
  return async (...args) => {
    try {
      setStatus("loading…");
      await fn(...args);
      setStatus("");
    } catch (e) {
      if (e instanceof Unauthorized) { setStatus(""); askToken(!!token()); return; }
      setStatus(e.message, true);
    }
  };
}

// ---- the URL ----
function readURL() {
  const q = new URLSearchParams(location.search);
  const n = k => Number(q.get(k)) || 0;
  return { run: q.get("run") || "", step: n("step"), group: n("group"), node: n("node"),
    compare: (q.get("compare") || "").split(",").filter(Boolean) };
}

function writeURL(replace) {
  const q = new URLSearchParams();
  if (state.compare.length) q.set("compare", state.compare.join(","));
  if (state.run) q.set("run", state.run);
  if (state.step) q.set("step", state.step);
  if (state.group) q.set("group", state.group);
  if (state.node) q.set("node", state.node);
  const url = location.pathname + "?" + q.toString();
  if (url === location.pathname + location.search) return;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
}

// ---- runs ----
async function loadRuns() {
  const u = readURL();
  early.clear();
  if (u.run && !u.compare.length) {
    prefetch(`/runs/${enc(u.run)}/steps`);
    prefetch(rubricPath(u.run, 0));
    if (u.step) prefetch(`/runs/${enc(u.run)}/steps/${u.step}/groups`);
    if (u.group) prefetch(`/runs/${enc(u.run)}/groups/${u.group}/view`);
  }
  // A link to a run shows it without waiting for the list of runs (a
  // summary per run): the list fills in the side bar and the run's head.
  const list = Promise.all([api("/health"), api("/runs")]);
  const shown = u.run && !u.compare.length ? showRun(u.run, u.step, u.group, u.node).then(() => null, e => e) : null;
  const [health, data] = await list;
  $("token-form").hidden = true;
  $("file").textContent = health.path || "";
  state.runs = data.runs;
  state.listed = true;
  drawRunList();
  const failed = shown ? await shown : true;
  if (failed === null && state.runs.some(r => r.run.id === u.run)) {
    drawRunHead(u.run);
    setLive();
    writeURL(true);
    return;
  }
  await applyURL(true);
}

function drawRunList() {
  if (!state.listed) return; // a run shown from a link before the list came
  const ul = $("runs");
  ul.replaceChildren();
  for (const r of state.runs) {
    const id = r.run.id;
    const box = el("input", { type: "checkbox", "aria-label": "compare " + id, "data-compare": id,
      on: { change: e => toggleCompare(id, e.target.checked) } });
    box.checked = state.compare.includes(id);
    const info = r.damaged ? `damaged: ${r.damaged}` : `${r.run.status} · step ${r.run.last_step} · ${r.groups} groups · ${r.nodes} nodes`;
    const b = el("button", { "data-run": id, type: "button", on: { click: () => openRun(id) } }, id, el("small", { text: info }));
    b.classList.toggle("sel", id === state.run && !state.compare.length);
    ul.append(el("li", {}, box, b));
  }
  if (state.runs.length === 0) ul.append(el("li", { class: "dim", text: "no runs yet" }));
}

// applyURL shows what the URL names: a comparison, or a run and within it
// a step, a group and a node (each defaulting to the latest).
async function applyURL(first) {
  const u = readURL();
  state.compare = u.compare.filter(id => state.runs.some(r => r.run.id === id));
  drawRunList();
  if (state.compare.length) {
    $("run-panel").hidden = true;
    await showCompare();
    if (first) writeURL(true);
    return;
  }
  $("compare-panel").hidden = true;
  const run = state.runs.find(r => r.run.id === u.run) || state.runs[0];
  if (!run) return;
  await showRun(run.run.id, u.step, u.group, u.node);
  if (first) writeURL(true);
}

const openRun = guard(async id => {
  state.compare = [];
  await showRun(id, 0, 0, 0);
  writeURL();
});

async function showRun(id, step, group, node) {
  const changed = state.run !== id;
  state.run = id;
  drawRunList();
  $("compare-panel").hidden = true;
  $("run-panel").hidden = false;
  if (changed || !state.steps.length) {
    state.env = null;
    state.scalars = null;
    const rubrics = loadRubrics(0);
    const steps = await take(`/runs/${enc(id)}/steps`);
    state.steps = steps.steps;
    drawRunHead(id);
    await drawRunCharts();
    drawStepSelect();
    await rubrics;
  }
  const last = state.steps.length ? state.steps[state.steps.length - 1].step : 0;
  await showStep(state.steps.some(s => s.step === step) ? step : last, group, node);
  setLive();
}

function summaryOf(id) { return state.runs.find(r => r.run.id === id) || {}; }

// drawRunHead draws what the list of runs says of run id (nothing but its
// name before the list arrives).
function drawRunHead(id) {
  const sum = summaryOf(id), run = sum.run;
  state.events = sum.events || 0;
  $("run-title").textContent = `run ${id}`;
  $("run-summary").textContent = !run ? "" :
    `${run.status} · last completed step ${run.last_step} · ${sum.groups} groups (${sum.open_groups} open) · ` +
    `${sum.nodes} nodes · ${sum.turns} turns stored · ${sum.leaves} leaves · ${sum.frontier} active`;
  $("run-config-text").textContent = !run || run.config == null ? "(none)" : JSON.stringify(run.config, null, 2);
}

function drawStepSelect() {
  $("step").replaceChildren(...state.steps.map(s => el("option", { value: s.step, text: `step ${s.step} (${s.groups} groups)` })));
}

async function showStep(step, group, node) {
  state.step = step;
  $("step").value = step;
  if (!step) {
    $("group").replaceChildren();
    $("group-panel").hidden = true;
    $("traj").hidden = true;
    return;
  }
  const data = await take(`/runs/${enc(state.run)}/steps/${step}/groups`);
  $("group").replaceChildren(...data.groups.map(g => el("option", { value: g.id, text: `group ${g.id} · ${g.task || "task"} · ${g.status}` })));
  const g = data.groups.find(g => g.id === group) || data.groups[0];
  if (g) await showGroup(g.id, node);
}

async function showGroup(id, node) {
  state.group = id;
  $("group").value = id;
  const view = await take(`/runs/${enc(state.run)}/groups/${id}/view`);
  drawGroup(view);
  if (node && view.nodes.some(n => n.id === node)) await showNode(node);
  else { state.node = 0; $("traj").hidden = true; }
}

// User actions push a history entry; the back button pops it.
const pick = {
  step: guard(async s => { await showStep(Number(s), 0, 0); writeURL(); }),
  group: guard(async g => { await showGroup(Number(g), 0); writeURL(); }),
  node: guard(async n => { await showNode(Number(n)); writeURL(); }),
};

// ---- live refresh ----
// While the run is being written, the list is polled; a change in its event
// count redraws the charts, the steps and an open group.
let liveTimer = 0;
function setLive() {
  const sum = summaryOf(state.run);
  const running = !state.compare.length && sum.run && (sum.run.status === "running" || sum.open_groups > 0);
  $("live-label").hidden = !running;
  clearTimeout(liveTimer);
  if (running && $("live").checked) liveTimer = setTimeout(refresh, LIVE_MS);
}
const LIVE_MS = 3000;

async function refresh() {
  try {
    const data = await api("/runs");
    state.runs = data.runs;
    drawRunList();
    const sum = summaryOf(state.run);
    if (!state.compare.length && sum.events !== state.events) {
      const steps = await api(`/runs/${enc(state.run)}/steps`);
      state.steps = steps.steps;
      state.env = null;
      state.scalars = null;
      drawRunHead(state.run);
      await drawRunCharts();
      const at = state.step;
      drawStepSelect();
      $("step").value = at;
      if (state.group) {
        const gv = await api(`/runs/${enc(state.run)}/groups/${state.group}/view`);
        drawGroup(gv, true);
      }
      setStatus(`updated ${new Date().toLocaleTimeString()}`);
    }
  } catch (e) {
    setStatus(e.message, true);
  }
  setLive();
}

// ---- boot ----
document.addEventListener("DOMContentLoaded", () => {
  $("step").addEventListener("change", e => pick.step(e.target.value));
  $("group").addEventListener("change", e => pick.group(e.target.value));
  $("live").addEventListener("change", setLive);
  $("token-form").addEventListener("submit", e => {
    e.preventDefault();
    sessionStorage.setItem("patrdb-token", $("token-input").value.trim());
    $("token-input").value = "";
    guard(loadRuns)();
  });
  window.addEventListener("popstate", guard(() => applyURL(false)));
  initCharts();
  initTree();
  initRubrics();
  guard(loadRuns)();
});
