// Curves per step or per env step, run comparison, and the rubric table.
"use strict";

const PALETTE = ["#2f7ed8", "#d0453a", "#2e9d57", "#8a63d2", "#d89b22", "#1a9aa0", "#c2528b", "#555"];
let xAxis = "step";

function initCharts() {
  for (const s of document.querySelectorAll("select.xaxis")) {
    s.addEventListener("change", e => {
      xAxis = e.target.value;
      for (const o of document.querySelectorAll("select.xaxis")) o.value = xAxis;
      guard(state.compare.length ? showCompare : drawRunCharts)();
    });
  }
  $("compare-close").addEventListener("click", () => {
    const keep = state.compare[0];
    state.compare = [];
    guard(async () => { await showRun(keep, 0, 0, 0); writeURL(); })();
  });
}

// series of one run's figure against the chosen x axis: env steps come
// from the run's view, the figures from its steps.
function seriesOf(steps, env, figure, closedOnly) {
  const envAt = new Map((env || []).map(e => [e.step, e.env_steps_total]));
  return steps.filter(s => !closedOnly || s.closed_groups > 0)
    .map(s => [xAxis === "env" ? (envAt.get(s.step) || 0) : s.step, figure(s)]);
}

const FIGURES = [
  { id: "success", title: "Success (share of leaves with reward > 0)", fn: s => s.success, max: 1 },
  { id: "mean-reward", title: "Mean outcome reward of the leaves", fn: s => s.mean_reward },
  { id: "zv", title: "Zero-variance groups (share)", fn: s => s.zero_variance_share, max: 1 },
];

function chartBox(id, title) {
  return el("figure", {}, el("figcaption", { text: title }),
    el("svg:svg", { id, class: "chart", viewBox: "0 0 360 180", role: "img", "aria-label": title }));
}

// envSteps fetches a run's env steps per step, needed only once a reader
// plots against them.
async function envSteps(id) {
  return xAxis === "env" ? (await api(`/runs/${enc(id)}/env-steps`)).steps : [];
}

async function drawRunCharts() {
  if (xAxis === "env" && !state.env) state.env = await envSteps(state.run);
  const box = $("charts");
  box.replaceChildren(...FIGURES.map(f => chartBox("chart-" + f.id, f.title)), chartBox("chart-pools", "Rubric pools in play (public, candidate)"));
  for (const f of FIGURES) {
    lineChart($("chart-" + f.id), [{ name: f.id, color: "#2f7ed8", points: seriesOf(state.steps, state.env, f.fn, true) }], f.max);
  }
  const colors = { public: "#2e9d57", candidate: "#d89b22" };
  lineChart($("chart-pools"), Object.keys(colors).map(p => (
    { name: p, color: colors[p], points: seriesOf(state.steps, state.env, s => s.pools[p] || 0, false) })));
  const last = state.steps[state.steps.length - 1];
  if (last) box.querySelector("#chart-pools").previousSibling.textContent +=
    ` · now also ${last.pools.retired || 0} retired, ${last.pools.merged || 0} merged`;
}

function lineChart(svg, series, yMax) {
  svg.replaceChildren();
  const W = 360, H = 180, R = 8, T = 22, B = 22;
  const all = series.flatMap(s => s.points);
  if (all.length === 0) {
    svg.append(el("svg:text", { x: W / 2, y: H / 2, "text-anchor": "middle", text: "no closed steps yet" }));
    return;
  }
  const xs = all.map(p => p[0]), ys = all.map(p => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs);
  const ymax = yMax ?? Math.max(1e-9, ...ys);
  const ymin = Math.min(0, ...ys);
  const tick = i => {
    const v = ymin + (ymax - ymin) * i / 4;
    return ymax - ymin > 4 ? Math.round(v) : v;
  };
  const labels = [0, 1, 2, 3, 4].map(i => fmt(tick(i), 2));
  const L = Math.max(34, 8 + 7 * Math.max(...labels.map(t => String(t).length)));
  const sx = x => L + (x1 === x0 ? (W - L - R) / 2 : (x - x0) / (x1 - x0) * (W - L - R));
  const sy = y => H - B - (y - ymin) / (ymax - ymin || 1) * (H - T - B);
  for (let i = 0; i <= 4; i++) {
    svg.append(el("svg:line", { class: "grid", x1: L, x2: W - R, y1: sy(tick(i)), y2: sy(tick(i)) }));
    svg.append(el("svg:text", { x: L - 4, y: sy(tick(i)) + 3, "text-anchor": "end", text: labels[i] }));
  }
  svg.append(el("svg:line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  svg.append(el("svg:line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  const unit = xAxis === "env" ? " env steps" : "";
  const xl = v => xAxis === "env" ? `${v}${unit}` : `step ${v}`;
  svg.append(el("svg:text", { x: sx(x0), y: H - 6, "text-anchor": x1 === x0 ? "middle" : "start", text: xl(x0) }));
  if (x1 !== x0) svg.append(el("svg:text", { x: sx(x1), y: H - 6, "text-anchor": "end", text: xl(x1) }));
  let lx = L;
  for (const s of series) {
    const d = s.points.map((p, i) => `${i ? "L" : "M"}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join("");
    svg.append(el("svg:path", { class: "series", d, stroke: s.color, "data-series": s.name },
      el("svg:title", { text: s.name })));
    // Few points get markers with a tooltip; many would only hide the line.
    if (s.points.length <= 40) for (const p of s.points) {
      svg.append(el("svg:circle", { cx: sx(p[0]), cy: sy(p[1]), r: 2.2, fill: s.color },
        el("svg:title", { text: `${s.name} at ${xl(p[0])}: ${fmt(p[1])}` })));
    }
    if (series.length > 1) {
      svg.append(el("svg:rect", { x: lx, y: 6, width: 10, height: 6, fill: s.color }));
      svg.append(el("svg:text", { x: lx + 13, y: 12, text: s.name }));
      lx += 20 + s.name.length * 5.5;
    }
  }
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

async function showCompare() {
  clearTimeout(liveTimer);
  drawRunList();
  const runs = await Promise.all(state.compare.map(async id => {
    const [steps, env] = await Promise.all([api(`/runs/${enc(id)}/steps`), envSteps(id)]);
    return { id, steps: steps.steps, env, run: summaryOf(id).run };
  }));
  $("compare-panel").hidden = false;
  $("compare-title").textContent = `Comparing ${runs.map(r => r.id).join(", ")}`;
  const box = $("compare-charts");
  box.replaceChildren(...FIGURES.map(f => chartBox("cmp-" + f.id, f.title)));
  for (const f of FIGURES) {
    lineChart($("cmp-" + f.id), runs.map((r, i) => ({ name: r.id, color: PALETTE[i % PALETTE.length], points: seriesOf(r.steps, r.env, f.fn, true) })), f.max);
  }
  drawConfigTable(runs);
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
