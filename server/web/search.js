// The daily tools: search over a run's trajectories (answered by the
// server from the store), branches of a group side by side from their
// fork, tool calls shown as structure, and downloads.
"use strict";

// ---- search ----
function searchQuery() {
  const q = new URLSearchParams();
  const put = (k, id) => { const v = $(id).value.trim(); if (v) q.set(k, v); };
  put("text", "s-text");
  put("status", "s-status");
  for (const k of ["min_reward", "max_reward", "min_score", "max_score", "min_advantage", "max_advantage"]) put(k, "s-" + k.replaceAll("_", "-"));
  put("policy_version", "s-version");
  put("step", "s-step");
  for (const [k, id] of [["leaves", "s-leaves"], ["failed", "s-failed"], ["retried", "s-retried"]]) if ($(id).checked) q.set(k, "true");
  q.set("limit", "200");
  return q;
}

const runSearch = guard(async () => {
  const res = await api(`/runs/${enc(state.run)}/search?${searchQuery()}`);
  const tb = document.querySelector("#search-results tbody");
  $("s-summary").textContent = `${res.hits.length}${res.more ? "+" : ""} found · ${res.scanned} nodes scanned`;
  tb.replaceChildren(...res.hits.map(h => el("tr", { "data-node": h.node, tabindex: "0", class: "hit",
    on: { click: () => openHit(h), keydown: e => { if (e.key === "Enter") openHit(h); } } },
  el("td", { class: "num", text: "#" + h.node }), el("td", { class: "num", text: h.step }), el("td", { class: "num", text: h.group }),
  el("td", { text: h.task }), el("td", {}, el("span", { class: "chip " + h.status, text: h.status })),
  el("td", { class: "num", text: fmt(h.reward) }), el("td", { class: "num", text: fmt(h.last_score) }),
  el("td", { class: "num", text: fmt(h.advantage) }),
  el("td", { class: "num", text: h.max_policy_version ? (h.min_policy_version === h.max_policy_version ? `v${h.min_policy_version}` : `v${h.min_policy_version}–${h.max_policy_version}`) : "–" }),
  el("td", { class: "snippet", text: h.match_snippet ? `${h.match_where}${h.match_turn >= 0 ? " of turn " + (h.match_turn + 1) : ""}: ${h.match_snippet}` : "" }))));
  if (!res.hits.length) tb.append(el("tr", {}, el("td", { colspan: 10, class: "dim", text: "no node matches" })));
});

// openHit shows a hit's trajectory in its step and group, as a link would.
const openHit = guard(async h => {
  await showStep(h.step, h.group, h.node);
  writeURL();
  $("traj").scrollIntoView();
});

// ---- branches side by side ----
const showBranches = guard(async () => {
  const ids = [...tree.picked].sort((a, b) => a - b);
  const v = await api(`/runs/${enc(state.run)}/branches?nodes=${ids.join(",")}`);
  drawBranches(v);
  $("branches").scrollIntoView();
});

function drawBranches(v) {
  $("branches").hidden = false;
  $("branches-title").textContent = `${v.branches.length} branches of group ${v.group.id}, side by side from turn ${v.fork + 1}`;
  $("branches-fork").textContent = v.fork ? `They share their first ${v.fork} turns (the last stored in node #${v.fork_node}); the rows below start where they part.`
    : "They share nothing but the prompt.";
  const t = $("branches-grid");
  t.tHead.replaceChildren(el("tr", {}, el("th", { text: "turn" }), ...v.branches.map(b => el("th", { "data-node": b.node },
    el("a", { href: "#", text: `#${b.node}`, on: { click: e => { e.preventDefault(); pick.node(b.node); } } }),
    " ", el("span", { class: "chip " + b.status, text: b.status }),
    el("div", { class: "dim small", text: `reward ${fmt(b.reward)} · advantage ${fmt(b.advantage)} · ${b.path_len} turns` + (b.error ? ` · ${b.error}` : "") })))));
  const rows = [];
  for (const [i, s] of v.shared.entries()) {
    const pos = v.fork - v.shared.length + i;
    rows.push(el("tr", { class: "shared" }, el("td", { class: "num dim", text: pos + 1 }),
      el("td", { colspan: v.branches.length, class: "dim" }, block("action", s.action, s.action_token_count), block("observation", s.observation, s.observation_token_count))));
  }
  if (v.fork) rows.push(el("tr", { class: "fork" }, el("td", { colspan: v.branches.length + 1, text: `fork: the branches part after turn ${v.fork}` })));
  const longest = Math.max(...v.branches.map(b => b.turns.length));
  const scoreCell = (b, turn) => {
    const ivs = b.intervals.filter(x => x.turn === turn);
    if (!ivs.length) return el("td", {});
    return el("td", { class: "interval" }, ...ivs.map(x => el("div", {},
      `score ${fmt(x.score)} (interval ${x.interval})`,
      x.decision ? el("span", { class: "decision " + x.decision.action, text: ` → ${x.decision.action}` }) : null)));
  };
  const hasScore = turn => v.branches.some(b => b.intervals.some(x => x.turn === turn));
  if (hasScore(v.fork)) rows.push(el("tr", { class: "score-row" }, el("td", { class: "dim", text: "scored" }), ...v.branches.map(b => scoreCell(b, v.fork))));
  for (let k = 0; k < longest; k++) {
    const pos = v.fork + k;
    rows.push(el("tr", { class: "turn-row", "data-turn": pos }, el("td", { class: "num", text: pos + 1 }), ...v.branches.map(b => {
      const tu = b.turns[k];
      if (!tu) return el("td", { class: "ended dim", text: k === b.turns.length ? `ended: ${b.status}` : "" });
      return el("td", { "data-node": tu.node }, block("action", tu.action, tu.action_token_count), block("observation", tu.observation, tu.observation_token_count),
        tu.reward ? el("div", { class: "dim small", text: `reward ${fmt(tu.reward)}` }) : null);
    })));
    if (hasScore(pos + 1)) rows.push(el("tr", { class: "score-row" }, el("td", { class: "dim", text: "scored" }), ...v.branches.map(b => scoreCell(b, pos + 1))));
  }
  t.tBodies[0].replaceChildren(...rows);
}

// ---- tool calls ----
// structured renders text that carries JSON — the whole text, a fenced
// ```json block, or a {...} object inside it (a tool call's arguments, a
// tool's result) — as a tree of keys and values, beside the text; null
// when the text holds no JSON object or array.
function structured(text) {
  const found = jsonIn(text);
  if (!found) return null;
  const call = toolCall(found.value);
  return el("div", { class: "json" + (call ? " tool-call" : "") },
    call ? el("div", { class: "tool-name", text: `tool call: ${call}` }) : null,
    jsonTree(found.value, 0));
}

function jsonIn(text) {
  const t = text.trim();
  const tryParse = s => { try { const v = JSON.parse(s); return v !== null && typeof v === "object" ? v : undefined; } catch { return undefined; } };
  let v = (t.startsWith("{") || t.startsWith("[")) ? tryParse(t) : undefined;
  if (v !== undefined) return { value: v, whole: true };
  const fence = /```(?:json)?\s*\n([\s\S]*?)```/.exec(text);
  if (fence && (v = tryParse(fence[1])) !== undefined) return { value: v };
  // The first balanced {...} that parses, within a bounded scan.
  for (let i = text.indexOf("{"); i >= 0 && i < 20000; i = text.indexOf("{", i + 1)) {
    let depth = 0, inStr = false;
    for (let j = i; j < text.length && j < i + 100000; j++) {
      const c = text[j];
      if (inStr) { if (c === "\\") j++; else if (c === '"') inStr = false; continue; }
      if (c === '"') inStr = true;
      else if (c === "{") depth++;
      else if (c === "}" && --depth === 0) {
        if ((v = tryParse(text.slice(i, j + 1))) !== undefined && Object.keys(v).length) return { value: v };
        break;
      }
    }
  }
  return null;
}

// toolCall names a call in the shapes agents write: {"name", "arguments"},
// {"tool", "input"|"args"}, {"function": {"name"}}, {"tool_calls": [...]}.
function toolCall(v) {
  if (!v || typeof v !== "object") return "";
  if (Array.isArray(v.tool_calls)) return v.tool_calls.map(toolCall).filter(Boolean).join(", ");
  if (v.function && typeof v.function === "object" && v.function.name) return String(v.function.name);
  const name = v.name ?? v.tool ?? v.tool_name;
  if (typeof name === "string" && ("arguments" in v || "args" in v || "input" in v || "parameters" in v)) return name;
  return "";
}

function jsonTree(v, depth) {
  if (v === null || typeof v !== "object") {
    return el("span", { class: "jv " + (v === null ? "null" : typeof v), text: typeof v === "string" ? v : JSON.stringify(v) });
  }
  const entries = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
  if (!entries.length) return el("span", { class: "jv", text: Array.isArray(v) ? "[]" : "{}" });
  const dl = el("dl", { class: "jt" });
  for (const [k, x] of entries) {
    dl.append(el("dt", { text: String(k) }), el("dd", {}, depth > 6 ? el("span", { class: "jv", text: JSON.stringify(x) }) : jsonTree(x, depth + 1)));
  }
  return dl;
}

// ---- downloads ----
// download fetches path with the page's token and saves it as name: a
// plain link would not carry the Authorization header.
async function download(path, name) {
  const headers = {};
  const t = token();
  if (t) headers.Authorization = "Bearer " + t;
  const resp = await fetch("/api/v1" + path, { headers });
  if (!resp.ok) {
    const body = await resp.json().catch(() => ({}));
    throw new Error(body.error || ("HTTP " + resp.status));
  }
  const url = URL.createObjectURL(await resp.blob());
  const a = el("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

document.addEventListener("DOMContentLoaded", () => {
  $("search-form").addEventListener("submit", e => { e.preventDefault(); runSearch(); });
  $("branches-open").addEventListener("click", () => showBranches());
  $("traj-download").addEventListener("click", guard(() => download(`/runs/${enc(state.run)}/nodes/${state.node}/trajectory`, `${state.run}-node-${state.node}.json`)));
  $("batch-download").addEventListener("click", guard(() => download(`/runs/${enc(state.run)}/steps/${state.step}/batch`, `${state.run}-step-${state.step}.safetensors`)));
});
