// A trajectory as text an LLM wrote and read: white space kept, long blocks
// folded, each turn with its token counts and a logprob strip, the process
// scores where they were taken, the path's pruned and failed nodes marked,
// and the leaf's reward and advantage.
"use strict";

// A block longer than this many lines or characters starts folded.
const FOLD_LINES = 12, FOLD_CHARS = 1200;

async function showNode(id) {
  state.node = id;
  markSelected(id);
  const t = await api(`/runs/${enc(state.run)}/nodes/${id}/view`);
  drawTrajectory(t);
}

function block(kind, text, tokens) {
  const lines = lineCount(text);
  const pre = el("pre", { class: "block " + kind, text });
  const what = `${kind} · ${lines} line${lines === 1 ? "" : "s"}${tokens ? ` · ${tokens} tokens` : ""}`;
  // Text that carries JSON (a tool call, a tool's result) reads as its
  // structure, the text itself a click away.
  const json = structured(text);
  if (json) return el("div", { class: "blk has-json" }, el("div", { class: "blk-head dim", text: what }), json,
    el("details", { class: "blk raw" }, el("summary", { text: "as written" }), pre));
  if (lines <= FOLD_LINES && text.length <= FOLD_CHARS) return el("div", { class: "blk" }, el("div", { class: "blk-head dim", text: what }), pre);
  return el("details", { class: "blk folded" }, el("summary", { text: what + " (folded)" }), pre);
}

// strip draws a turn's logprobs as cells from pale (sure) to red (unsure).
function strip(values) {
  const s = el("span", { class: "strip", role: "img", "aria-label": "action logprobs, left to right" });
  for (const v of values) {
    const c = el("span", { class: "cell", title: `logprob ${fmt(v, 2)} (p ${fmt(Math.exp(v), 2)})` });
    const p = Math.exp(v);
    c.style.background = `hsl(${Math.round(p * 50)}, 80%, ${Math.round(40 + p * 50)}%)`;
    s.append(c);
  }
  return s;
}

function foldAll(open) {
  for (const d of document.querySelectorAll("#traj details.folded")) d.open = open;
}

function drawTrajectory(t) {
  const n = t.node;
  $("traj").hidden = false;
  $("traj-own-link").hidden = t.inherited === 0;
  $("traj-title").textContent = `Trajectory of node ${n.id}: ${t.turns.length} turns, ${t.inherited} inherited`;
  $("traj-node").textContent = `${n.status} · depth ${n.depth} · group ${t.group.id} (${t.group.task}) · step ${t.group.step}` +
    (n.worker ? ` · worker ${n.worker}` : "") + (n.attempt ? ` · attempt ${n.attempt}` : "");
  $("traj-path").replaceChildren(el("span", { class: "dim", text: "path: " }), ...t.path.flatMap((p, i) => [
    i ? " → " : null,
    el("a", { href: "#", class: "pathnode " + p.status, "data-node": p.id, title: `${p.status}${p.error ? ": " + p.error : ""}`,
      on: { click: e => { e.preventDefault(); pick.node(p.id); } } },
    `#${p.id} ×${p.count}`, p.status === "pruned" ? el("span", { class: "mark pruned", text: " ✂ pruned" }) : null,
    p.status === "failed" ? el("span", { class: "mark failed", text: " ✖ failed" }) : null),
  ].filter(Boolean)));
  const out = $("traj-outcome");
  out.replaceChildren();
  const a = t.advantage;
  if (n.has_reward || a || n.error) {
    out.append(el("p", { class: "outcome " + n.status },
      el("strong", { text: n.status === "pruned" ? "✂ pruned leaf" : n.status === "failed" ? "✖ failed" : n.status }),
      n.has_reward ? ` · reward ${fmt(n.reward)}` : null,
      a ? ` · advantage ${fmt(a.advantage)} (outcome ${fmt(a.outcome)}, group mean ${fmt(a.mean)}, std ${fmt(a.std)}` +
        (a.lambda ? `, rubric score ${fmt(a.rubric_score)} × λ ${fmt(a.lambda)}` : "") + ")" : (n.status === "completed" || n.status === "pruned" || n.status === "truncated") ? " · no advantage yet (group open)" : null,
      n.error ? ` · error: ${n.error}` : null));
  }
  const ol = $("traj-turns");
  ol.replaceChildren();
  ol.append(el("li", { class: "prompt", value: 0 }, block("prompt", t.group.prompt || "(no prompt)", t.group.prompt_token_count)));
  // Scores are keyed by the path length they were taken at.
  const scoresAt = new Map();
  for (const s of t.scores) {
    if (!scoresAt.has(s.turn)) scoresAt.set(s.turn, []);
    scoresAt.get(s.turn).push(s);
  }
  const decisionOf = (node, iv) => ((t.path.find(p => p.id === node) || {}).decisions || []).find(d => d.interval === iv);
  t.turns.forEach((turn, i) => {
    if (i === t.inherited && t.inherited > 0) ol.append(el("li", { class: "prefix-end", id: "traj-own", tabindex: "-1", text: `inherited prefix ends: ${t.inherited} turns from ancestors, then node ${n.id}'s own` }));
    const inherited = i < t.inherited;
    const figs = [`${turn.action_token_count} action tokens`, `${turn.observation_token_count} observation tokens`];
    if (turn.mean_logprob !== null) figs.push(`mean logprob ${fmt(turn.mean_logprob, 2)} (min ${fmt(turn.min_logprob, 2)})`);
    if (turn.reward) figs.push(`reward ${fmt(turn.reward)}`);
    if (turn.done) figs.push("done");
    if (turn.policy_version) figs.push(`policy v${turn.policy_version}`);
    ol.append(el("li", { class: "turn" + (inherited ? " inherited" : " own"), value: i + 1, "data-node": turn.node, "data-index": turn.index },
      el("div", { class: "turn-head" }, el("span", { class: "dim", text: `turn ${i + 1} · node #${turn.node}${inherited ? " (inherited)" : ""} · ` + figs.join(" · ") }),
        turn.logprob_strip ? strip(turn.logprob_strip) : null),
      block("action", turn.action, turn.action_token_count),
      block("observation", turn.observation, turn.observation_token_count)));
    for (const s of scoresAt.get(i + 1) || []) {
      const d = decisionOf(s.node, s.interval);
      ol.append(el("li", { class: "score", "data-value": s.value },
        `score ${fmt(s.value)} after interval ${s.interval} (node #${s.node})`,
        d ? el("span", { class: "decision " + d.action, text: ` → ${d.action} by ${d.rule} (reference ${fmt(d.reference)}, delta ${fmt(d.delta)})` }) : null));
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  $("traj-unfold").addEventListener("click", () => foldAll(true));
  $("traj-fold").addEventListener("click", () => foldAll(false));
  // The fragment is the token's place; jump without touching it.
  $("traj-own-link").addEventListener("click", e => { e.preventDefault(); const m = $("traj-own"); if (m) { m.scrollIntoView(); m.focus(); } });
});
