// Curves per step or per env step, the trainer's own figures, run
// comparison, and the rubric table. Charts are uPlot's (vendor/, MIT, no
// network): hover values in the legend, round ticks, a log scale and
// smoothing; a figure with nothing to show is left out, never drawn empty.
"use strict";

const PALETTE = ["#2f7ed8", "#d0453a", "#2e9d57", "#8a63d2", "#d89b22", "#1a9aa0", "#c2528b", "#555"];
const view = { x: "step", smooth: 0, log: false };
// The charts drawn, by figure id: tests and the reader's own console read
// their data (uPlot instances).
const patrdbCharts = {};

function initCharts() {
  for (const s of document.querySelectorAll("select.xaxis")) {
    s.addEventListener("change", e => { view.x = e.target.value; syncControls(); redrawCharts(); });
  }
  for (const s of document.querySelectorAll("input.smooth")) {
    s.addEventListener("input", e => { view.smooth = Number(e.target.value); syncControls(); redrawCharts(false); });
  }
  for (const s of document.querySelectorAll("input.logy")) {
    s.addEventListener("change", e => { view.log = e.target.checked; syncControls(); redrawCharts(false); });
  }
  $("compare-close").addEventListener("click", () => {
    const keep = state.compare[0];
    state.compare = [];
    guard(async () => { await showRun(keep, 0, 0, 0); writeURL(); })();
  });
}

function syncControls() {
  for (const o of document.querySelectorAll("select.xaxis")) o.value = view.x;
  for (const o of document.querySelectorAll("input.smooth")) o.value = view.smooth;
  for (const o of document.querySelectorAll("input.logy")) o.checked = view.log;
  for (const o of document.querySelectorAll(".smooth-value")) o.textContent = view.smooth.toFixed(2);
}

// redrawCharts draws again what is on screen; refetch: the x axis changed,
// so env steps may be needed.
function redrawCharts(refetch = true) {
  if (state.compare.length) guard(refetch ? showCompare : drawCompareCharts)();
  else guard(drawRunCharts)();
}

// series of one run's figure against the chosen x axis: env steps come
// from the run's env-steps, the figures from its steps.
function seriesOf(steps, env, figure, closedOnly) {
  const envAt = new Map((env || []).map(e => [e.step, e.env_steps_total]));
  return steps.filter(s => !closedOnly || s.closed_groups > 0)
    .map(s => [view.x === "env" ? (envAt.get(s.step) || 0) : s.step, figure(s)]);
}

// scalarSeries is one trainer figure of a run against the x axis.
function scalarSeries(scalars, env, name) {
  const envAt = new Map((env || []).map(e => [e.step, e.env_steps_total]));
  return scalars.steps.filter(s => name in s.values)
    .map(s => [view.x === "env" ? (envAt.get(s.step) ?? null) : s.step, s.values[name]])
    .filter(p => p[0] !== null);
}

const FIGURES = [
  { id: "success", title: "Success (share of leaves with reward > 0)", fn: s => s.success, max: 1 },
  { id: "mean-reward", title: "Mean outcome reward of the leaves", fn: s => s.mean_reward },
  { id: "zv", title: "Zero-variance groups (share)", fn: s => s.zero_variance_share, max: 1 },
];

// envSteps fetches a run's env steps per step, needed only once a reader
// plots against them.
async function envSteps(id) {
  return view.x === "env" ? (await api(`/runs/${enc(id)}/env-steps`)).steps : [];
}

async function scalarsOf(id) {
  return api(`/runs/${enc(id)}/scalars`);
}

// smooth is the exponential moving average TensorBoard draws, debiased
// so the first points are not pulled toward 0.
function smooth(points, w) {
  if (!w) return points;
  let last = 0, n = 0;
  return points.map(([x, y]) => {
    if (y === null || !isFinite(y)) return [x, y];
    last = last * w + (1 - w) * y;
    n++;
    return [x, last / (1 - w ** n)];
  });
}

// hasSignal is false for a figure whose every value is 0 or missing (the
// rubric pools of a run without rubrics): drawn, it would say nothing.
const hasSignal = series => series.some(s => s.points.some(p => p[1]));

function drawRunChartsInto(box, prefix, figs) {
  for (const k of Object.keys(patrdbCharts)) if (k.startsWith(prefix)) { patrdbCharts[k].destroy(); delete patrdbCharts[k]; }
  box.replaceChildren();
  const shown = figs.filter(f => f.series.some(s => s.points.length) && (!f.dropFlat || hasSignal(f.series)));
  if (!shown.length) {
    box.append(el("p", { class: "dim", text: "nothing to chart yet: no closed step and no trainer figures" }));
    return;
  }
  for (const f of shown) plot(box, prefix + f.id, f);
}

async function drawRunCharts() {
  if (view.x === "env" && !state.env) state.env = await envSteps(state.run);
  if (!state.scalars) state.scalars = await scalarsOf(state.run);
  const figs = FIGURES.map(f => ({ id: f.id, title: f.title, max: f.max,
    series: [{ name: f.id, color: PALETTE[0], points: seriesOf(state.steps, state.env, f.fn, true) }] }));
  const colors = { public: "#2e9d57", candidate: "#d89b22" };
  const last = state.steps[state.steps.length - 1];
  figs.push({ id: "pools", dropFlat: true,
    title: "Rubric pools in play (public, candidate)" + (last ? ` · now also ${last.pools.retired || 0} retired, ${last.pools.merged || 0} merged` : ""),
    series: Object.keys(colors).map(p => ({ name: p, color: colors[p], points: seriesOf(state.steps, state.env, s => s.pools[p] || 0, false) })) });
  for (const name of state.scalars.names) {
    figs.push({ id: "scalar-" + name, trainer: true, title: `trainer: ${name}`,
      series: [{ name, color: PALETTE[3], points: scalarSeries(state.scalars, state.env, name) }] });
  }
  drawRunChartsInto($("charts"), "chart-", figs);
}

// plot draws one figure: its series (each [[x, y], ...]) on a shared x.
function plot(box, id, f) {
  const xs = [...new Set(f.series.flatMap(s => s.points.map(p => p[0])))].sort((a, b) => a - b);
  const at = new Map(xs.map((x, i) => [x, i]));
  const data = [xs];
  const series = [{ label: view.x === "env" ? "env steps" : "step" }];
  const lines = f.series.flatMap(s => view.smooth ? [{ ...s, raw: true }, s] : [s]);
  let positive = true;
  for (const s of lines) {
    const ys = new Array(xs.length).fill(null);
    for (const [x, y] of s.raw || !view.smooth ? s.points : smooth(s.points, view.smooth)) {
      ys[at.get(x)] = y;
      if (y !== null && y <= 0) positive = false;
    }
    data.push(ys);
    series.push({ label: s.raw ? s.name + " (raw)" : s.name, stroke: s.raw ? s.color + "40" : s.color, width: s.raw ? 1 : 2,
      spanGaps: true, points: { show: xs.length <= 40 && !s.raw }, value: (u, v) => v === null || v === undefined ? "–" : fmt(v, 4) });
  }
  const log = view.log && positive;
  const fig = el("figure", { class: "plot" + (f.trainer ? " trainer" : ""), "data-id": id, "data-series": f.series.length,
    "data-points": Math.max(...f.series.map(s => s.points.length)) },
  el("figcaption", { text: f.title + (view.log && !positive ? " (linear: log needs positive values)" : "") }));
  box.append(fig);
  const opts = {
    width: 380, height: 190, legend: { live: true },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: false }, y: log ? { distr: 3 } : { range: (u, lo, hi) => yRange(lo, hi, f.max) } },
    axes: [{ size: 30, incrs: WHOLE, values: (u, ticks) => ticks.map(v => shortNum(v)) }, { size: 48, values: (u, ticks) => ticks.map(v => shortNum(v)) }],
    series,
  };
  patrdbCharts[id] = new uPlot(opts, data, fig);
}

// WHOLE are the x axis' tick steps: steps and env steps are counts, so
// ticks fall on whole, round numbers (1, 2, 5, 10, 20, 50, ...).
const WHOLE = [1, 2, 5].flatMap(m => [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8].map(p => m * p)).sort((a, b) => a - b);

// yRange starts a positive figure at 0 and ends a share at 1, and gives a
// flat line room, so ticks land on round values.
function yRange(lo, hi, max) {
  if (lo === null || hi === null) return [0, 1];
  let a = Math.min(lo, 0), b = max !== undefined ? Math.max(hi, max) : hi;
  if (a === b) b = a + (Math.abs(a) || 1);
  return uPlot.rangeNum(a, b, 0.05, true);
}

// shortNum writes an axis value briefly: 12k, 0.25, 1e-6.
function shortNum(v) {
  if (v === null || v === undefined) return ""; // a log axis' skipped tick
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toPrecision(3).replace(/\.?0+$/, "") + "M";
  if (a >= 1e4) return (v / 1e3).toPrecision(3).replace(/\.?0+$/, "") + "k";
  if (a < 1e-3) return Number(v.toPrecision(2)).toExponential();
  return String(Number(v.toPrecision(4)));
}

// ---- comparison ----

function toggleCompare(id, on) {
  const set = new Set(state.compare.length ? state.compare : (state.run ? [state.run] : []));
  if (on) set.add(id); else set.delete(id);
  state.compare = [...set];
  guard(async () => {
    if (state.compare.length) { $("run-panel").hidden = true; await showCompare(); }
    else await showRun(id, 0, 0, 0);
    writeURL();
  })();
}

let compared = [];

async function showCompare() {
  clearTimeout(liveTimer);
  drawRunList();
  compared = await Promise.all(state.compare.map(async id => {
    const [steps, env, scalars] = await Promise.all([api(`/runs/${enc(id)}/steps`), envSteps(id), scalarsOf(id)]);
    return { id, steps: steps.steps, env, scalars, run: summaryOf(id).run };
  }));
  $("compare-panel").hidden = false;
  $("compare-title").textContent = `Comparing ${compared.map(r => r.id).join(", ")}`;
  drawCompareCharts();
  drawConfigTable(compared);
}

function drawCompareCharts() {
  const color = i => PALETTE[i % PALETTE.length];
  const figs = FIGURES.map(f => ({ id: f.id, title: f.title, max: f.max,
    series: compared.map((r, i) => ({ name: r.id, color: color(i), points: seriesOf(r.steps, r.env, f.fn, true) })) }));
  const names = [...new Set(compared.flatMap(r => r.scalars.names))].sort();
  for (const name of names) {
    figs.push({ id: "scalar-" + name, trainer: true, title: `trainer: ${name}`,
      series: compared.map((r, i) => ({ name: r.id, color: color(i), points: scalarSeries(r.scalars, r.env, name) })) });
  }
  drawRunChartsInto($("compare-charts"), "cmp-", figs);
}

// flatten turns a config into dotted keys, so two runs line up key by key.
function flatten(v, prefix, out) {
  if (v !== null && typeof v === "object" && !Array.isArray(v)) {
    for (const k of Object.keys(v)) flatten(v[k], prefix ? prefix + "." + k : k, out);
  } else out.set(prefix || "(config)", JSON.stringify(v));
  return out;
}

function drawConfigTable(runs) {
  const flat = runs.map(r => flatten(r.run.config, "", new Map()));
  const keys = [...new Set(flat.flatMap(f => [...f.keys()]))].sort();
  const t = $("compare-config");
  t.tHead.replaceChildren(el("tr", {}, el("th", { text: "key" }), ...runs.map(r => el("th", { text: r.id }))));
  t.tBodies[0].replaceChildren(...keys.map(k => {
    const vals = flat.map(f => f.has(k) ? f.get(k) : "–");
    const differs = new Set(vals).size > 1;
    return el("tr", { class: differs ? "differs" : null, "data-key": k }, el("td", { text: k }), ...vals.map(v => el("td", { text: v })));
  }));
}

// ---- rubrics ----
const RUBRIC_PAGE = 50;
let rubricOffset = 0;

function initRubrics() {
  for (const b of document.querySelectorAll("#rubric-controls input[name=pool]")) b.addEventListener("change", () => loadRubrics(0));
  $("rubric-sort").addEventListener("change", () => loadRubrics(0));
  let timer = 0;
  $("rubric-q").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => loadRubrics(0), 250); });
  $("rubric-prev").addEventListener("click", () => loadRubrics(Math.max(0, rubricOffset - RUBRIC_PAGE)));
  $("rubric-next").addEventListener("click", () => loadRubrics(rubricOffset + RUBRIC_PAGE));
}

function rubricPath(run, offset) {
  const pools = [...document.querySelectorAll("#rubric-controls input[name=pool]:checked")].map(b => b.value);
  const q = new URLSearchParams({ offset, limit: RUBRIC_PAGE, sort: $("rubric-sort").value, q: $("rubric-q").value });
  if (pools.length) q.set("pool", pools.join(","));
  return `/runs/${enc(run)}/rubrics/page?${q}`;
}

const loadRubrics = guard(async offset => {
  const pools = [...document.querySelectorAll("#rubric-controls input[name=pool]:checked")];
  const page = await take(rubricPath(state.run, offset));
  rubricOffset = page.offset;
  drawRubrics(page, pools.length === 0);
});

function drawRubrics(page, noPool) {
  const tb = document.querySelector("#rubrics tbody");
  tb.replaceChildren();
  const end = page.offset + page.rubrics.length;
  const sizes = Object.entries(page.pools).map(([p, n]) => `${n} ${p}`).join(", ");
  $("rubric-range").textContent = page.total ? ` ${page.offset + 1}–${end} of ${page.total} (pools: ${sizes || "empty"}) ` : ` none (pools: ${sizes || "empty"}) `;
  $("rubric-prev").disabled = page.offset === 0;
  $("rubric-next").disabled = end >= page.total;
  if (!page.rubrics.length) {
    tb.append(el("tr", {}, el("td", { colspan: 12, class: "dim", text: noPool ? "showing public and candidate" : "no rubric matches" })));
    return;
  }
  for (const r of page.rubrics) {
    const u = r.usage || {};
    tb.append(el("tr", { "data-pool": r.pool, "data-rubric": r.id },
      el("td", { class: "num", text: r.id }), el("td", { text: r.pool }), el("td", { class: "text", text: r.text }),
      el("td", { class: "num", text: fmt(r.rho, 3) }), el("td", { class: "num", text: fmt(r.running_corr, 3) }),
      el("td", { class: "num", text: r.support }), el("td", { class: "num", text: u.activations }),
      el("td", { class: "num", text: u.last_activation >= 0 ? u.last_activation : "–" }),
      el("td", { class: "num", text: u.low_var_streak }), el("td", { class: "num", text: u.pairs_judged }),
      el("td", { class: "num", text: u.groups_unlocked }),
      el("td", { text: r.retire_reason ? `step ${r.retire_step}: ${r.retire_reason}` : (r.merged_into ? `merged into ${r.merged_into}` : "") })));
  }
}
