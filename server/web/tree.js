// The rollout tree as an outline: one row per node in depth-first order,
// its span over the turns it stores drawn from its fork point, coloured by
// reward, advantage or score. Subtrees collapse; above BIG nodes the tree
// opens collapsed to its roots under a summary, so thousands of nodes cost
// only the rows a reader opens. Arrow keys move, Enter opens a trajectory.
"use strict";

const BIG = 300, LEAF_ROWS = 200;
const tree = { view: null, byId: new Map(), kids: new Map(), open: new Set(), focus: 0, sortKey: "reward", sortDesc: true, picked: new Set() };

function initTree() {
  $("colour").addEventListener("change", () => drawRows());
  $("find-form").addEventListener("submit", e => { e.preventDefault(); findNode($("find").value.trim()); });
  $("expand-all").addEventListener("click", () => { for (const n of tree.view.nodes) if (n.child_count) tree.open.add(n.id); drawRows(); });
  $("collapse-all").addEventListener("click", () => { tree.open.clear(); drawRows(); });
  $("tree").addEventListener("keydown", treeKey);
  $("leaves-more").addEventListener("click", () => { tree.allLeaves = true; drawLeaves(); });
  for (const th of document.querySelectorAll("#leaves th[data-key]")) {
    const sortBy = () => {
      const k = th.dataset.key;
      tree.sortDesc = tree.sortKey === k ? !tree.sortDesc : k !== "id" && k !== "status";
      tree.sortKey = k;
      drawLeaves();
    };
    th.addEventListener("click", sortBy);
    th.addEventListener("keydown", e => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(); } });
  }
}

// drawGroup takes a view.GroupView. keep (a live refresh) keeps what the
// reader opened.
function drawGroup(view, keep) {
  tree.view = view;
  tree.byId = new Map(view.nodes.map(n => [n.id, n]));
  tree.kids = new Map();
  for (const n of view.nodes) {
    if (n.parent && tree.byId.has(n.parent)) {
      if (!tree.kids.has(n.parent)) tree.kids.set(n.parent, []);
      tree.kids.get(n.parent).push(n);
    }
  }
  if (!keep) {
    tree.allLeaves = false;
    tree.picked = new Set();
    $("branches").hidden = true;
    tree.open = new Set(view.nodes.length > BIG ? [] : view.nodes.filter(n => n.child_count).map(n => n.id));
    tree.focus = view.nodes.length ? view.nodes[0].id : 0;
  }
  const g = view.group, s = view.summary;
  $("group-panel").hidden = false;
  $("group-title").textContent = `Group ${g.id} · ${g.task || "task"} · step ${g.step} · ${g.status}`;
  $("group-prompt-text").textContent = g.prompt || "(no prompt)";
  $("group-prompt").querySelector("summary").textContent =
    `prompt · ${lineCount(g.prompt)} lines${g.prompt_token_count ? " · " + g.prompt_token_count + " tokens" : ""}`;
  const statuses = Object.entries(s.by_status).map(([k, v]) => `${v} ${k}`).join(", ");
  $("group-summary").textContent = `${s.nodes} nodes (${statuses}) · ${s.leaves} leaves · depth ${s.max_depth} · ` +
    `longest path ${s.max_path} turns · ${s.turns_stored} turns stored · nodes per depth ${s.depth_counts.join("/")} · ` +
    `reward ${rangeText(s.reward_range)} · advantage ${rangeText(s.advantage_range)}${s.zero_variance ? " · zero variance" : ""}` +
    (s.nodes > BIG ? ` · large tree: opened at its roots, expand or find a node` : "");
  drawRows();
  drawLeaves();
}

const lineCount = t => t ? t.split("\n").length : 0;
const rangeText = r => r.count ? `${fmt(r.min, 2)}…${fmt(r.max, 2)} (mean ${fmt(r.mean, 3)}, ${r.count})` : "none";

// colourOf maps a node's chosen figure to a colour: red (low) → green
// (high); grey when the node has none. Advantages centre on 0.
function colourOf(n) {
  const by = $("colour").value;
  if (by === "status") return null;
  const v = n[by];
  if (v === null || v === undefined) return "#c9ccd3";
  let t;
  if (by === "advantage") {
    const r = tree.view.summary.advantage_range, m = Math.max(Math.abs(r.min), Math.abs(r.max)) || 1;
    t = 0.5 + v / m / 2;
  } else if (by === "reward") {
    const r = tree.view.summary.reward_range;
    t = r.max > r.min ? (v - r.min) / (r.max - r.min) : (v > 0 ? 1 : 0);
  } else t = v;
  t = Math.max(0, Math.min(1, t));
  return `hsl(${Math.round(t * 120)}, 65%, 45%)`;
}

function drawColourKey() {
  const by = $("colour").value;
  $("colour-key").replaceChildren(by === "status"
    ? el("span", { class: "dim", text: "status colours: " }, ...["active", "expanded", "completed", "pruned", "truncated", "failed"].map(s => el("span", { class: "chip " + s, text: s })))
    : el("span", { class: "ramp", text: `low ${by}` }, el("span", { class: "ramp-bar" }), `high · grey: none`));
}

// visibleRows lists the nodes whose ancestors are all open.
function visibleRows() {
  const out = [];
  const walk = n => { out.push(n); if (tree.open.has(n.id)) for (const c of tree.kids.get(n.id) || []) walk(c); };
  for (const n of tree.view.nodes) if (!n.parent || !tree.byId.has(n.parent)) walk(n);
  return out;
}

function drawRows() {
  drawColourKey();
  const box = $("tree");
  const rows = visibleRows();
  const maxLen = Math.max(1, ...tree.view.nodes.map(n => n.base + n.turns));
  const px = Math.max(2, Math.min(14, 260 / maxLen));
  if (!rows.some(n => n.id === tree.focus) && rows.length) tree.focus = rows[0].id;
  box.replaceChildren(...rows.map(n => {
    const fill = colourOf(n);
    const open = tree.open.has(n.id);
    const mark = n.status === "pruned" ? "✂" : n.status === "failed" ? "✖" : n.status === "truncated" ? "…" : "";
    const tip = [`node ${n.id} · ${n.status} · depth ${n.depth}`, `turns ${n.base + 1}–${n.base + n.turns} (fork ${n.fork} of parent ${n.parent || "–"})`,
      `score ${fmt(n.last_score)} · reward ${fmt(n.reward)} · advantage ${fmt(n.advantage)}`, n.error ? "error: " + n.error : null].filter(Boolean).join("\n");
    return el("div", { class: "row" + (n.id === state.node ? " sel" : ""), role: "treeitem", "data-node": n.id, "data-status": n.status,
      "aria-level": n.depth + 1, "aria-expanded": n.child_count ? String(open) : null, "aria-selected": String(n.id === state.node),
      tabindex: n.id === tree.focus ? "0" : "-1", title: tip, on: { click: e => rowClick(e, n) } },
      el("span", { class: "indent", style: null, "data-depth": n.depth }),
      el("span", { class: "twisty", text: n.child_count ? (open ? "▾" : "▸") + n.child_count : "" }),
      el("span", { class: "dot " + n.status, "data-fill": fill || "" }),
      el("span", { class: "nid", text: "#" + n.id }),
      el("span", { class: "mark " + n.status, text: mark }),
      el("span", { class: "bar" }, el("span", { class: "span " + n.status, "data-x": n.base, "data-w": n.turns })),
      el("span", { class: "figs", text: `${n.last_score !== null ? "s " + fmt(n.last_score, 2) : ""}${n.reward !== null ? " r " + fmt(n.reward, 2) : ""}${n.advantage !== null ? " A " + fmt(n.advantage, 2) : ""}` }));
  }));
  // The style-src policy forbids inline style attributes; geometry and
  // colour go in through the CSSOM instead.
  for (const row of box.children) {
    const d = row.querySelector(".indent"), dot = row.querySelector(".dot"), sp = row.querySelector(".span");
    d.style.width = (Number(d.dataset.depth) * 14) + "px";
    if (dot.dataset.fill) dot.style.background = dot.dataset.fill;
    sp.style.marginLeft = (Number(sp.dataset.x) * px) + "px";
    sp.style.width = Math.max(2, Number(sp.dataset.w) * px) + "px";
    if (dot.dataset.fill) sp.style.background = dot.dataset.fill;
  }
  $("tree").setAttribute("data-rows", rows.length);
}

function rowClick(e, n) {
  tree.focus = n.id;
  if (e.target.classList.contains("twisty") && n.child_count) { toggle(n.id); return; }
  pick.node(n.id);
}

function toggle(id, to) {
  const open = to === undefined ? !tree.open.has(id) : to;
  if (open) tree.open.add(id); else tree.open.delete(id);
  drawRows();
  focusRow(id);
}

function focusRow(id) {
  tree.focus = id;
  for (const r of $("tree").children) r.tabIndex = Number(r.dataset.node) === id ? 0 : -1;
  const row = $("tree").querySelector(`[data-node="${id}"]`);
  if (row) { row.focus({ preventScroll: true }); row.scrollIntoView({ block: "nearest" }); }
}

function treeKey(e) {
  const rows = [...$("tree").children];
  const i = rows.findIndex(r => Number(r.dataset.node) === tree.focus);
  if (i < 0) return;
  const n = tree.byId.get(tree.focus);
  const go = j => { if (j >= 0 && j < rows.length) focusRow(Number(rows[j].dataset.node)); };
  switch (e.key) {
    case "ArrowDown": go(i + 1); break;
    case "ArrowUp": go(i - 1); break;
    case "Home": go(0); break;
    case "End": go(rows.length - 1); break;
    case "ArrowRight":
      if (n.child_count && !tree.open.has(n.id)) toggle(n.id, true); else go(i + 1);
      break;
    case "ArrowLeft":
      if (n.child_count && tree.open.has(n.id)) toggle(n.id, false);
      else if (n.parent && tree.byId.has(n.parent)) focusRow(n.parent);
      break;
    case "Enter": case " ": pick.node(n.id); break;
    default: return;
  }
  e.preventDefault();
}

// findNode opens the ancestors of a node and moves to it: the node with
// that id, or for a status (failed, pruned, …) the next node in it after
// the one in focus.
function findNode(text) {
  let n;
  if (/^#?\d+$/.test(text)) n = tree.byId.get(Number(text.replace(/^#/, "")));
  else {
    const all = tree.view.nodes, at = all.findIndex(x => x.id === tree.focus);
    for (let i = 1; i <= all.length && !n; i++) {
      const x = all[(at + i) % all.length];
      if (x.status === text.toLowerCase()) n = x;
    }
  }
  if (!n) { setStatus(`no node ${text} in this group`, true); return; }
  const id = n.id;
  setStatus("");
  for (let p = tree.byId.get(n.parent); p; p = tree.byId.get(p.parent)) tree.open.add(p.id);
  drawRows();
  focusRow(id);
  pick.node(id);
}

// markSelected shows the node whose trajectory is open.
function markSelected(id) {
  const n = tree.byId.get(id);
  if (n) {
    let hidden = false;
    for (let p = tree.byId.get(n.parent); p; p = tree.byId.get(p.parent)) if (!tree.open.has(p.id)) { tree.open.add(p.id); hidden = true; }
    if (hidden) drawRows();
  }
  for (const r of $("tree").children) {
    const on = Number(r.dataset.node) === id;
    r.classList.toggle("sel", on);
    r.setAttribute("aria-selected", String(on));
  }
  for (const r of document.querySelectorAll("#leaves tbody tr")) r.classList.toggle("sel", Number(r.dataset.node) === id);
}

function drawLeaves() {
  const leaves = tree.view.nodes.filter(n => ["completed", "pruned", "truncated"].includes(n.status))
    .map(n => ({ id: n.id, status: n.status, reward: n.reward, advantage: n.advantage, length: n.base + n.turns }));
  const k = tree.sortKey, sign = tree.sortDesc ? -1 : 1;
  const val = v => v === null || v === undefined ? -Infinity : v;
  leaves.sort((a, b) => (typeof a[k] === "string" ? a[k].localeCompare(b[k]) : val(a[k]) - val(b[k])) * sign || a.id - b.id);
  for (const th of document.querySelectorAll("#leaves th[data-key]")) {
    th.setAttribute("aria-sort", th.dataset.key === k ? (tree.sortDesc ? "descending" : "ascending") : "none");
  }
  // The best (or worst) rows of a big group first; the rest on request.
  const shown = tree.allLeaves ? leaves : leaves.slice(0, LEAF_ROWS);
  $("leaves-more").hidden = shown.length === leaves.length;
  $("leaves-more").textContent = `show all ${leaves.length} leaves`;
  // One tab stop for the table; arrow keys move between its rows.
  const move = (e, row) => {
    const to = e.key === "ArrowDown" ? row.nextElementSibling : e.key === "ArrowUp" ? row.previousElementSibling : null;
    if (!to) return;
    e.preventDefault();
    row.tabIndex = -1;
    to.tabIndex = 0;
    to.focus();
  };
  document.querySelector("#leaves tbody").replaceChildren(...shown.map((l, i) => el("tr", {
    "data-node": l.id, tabindex: i ? "-1" : "0", class: l.id === state.node ? "sel" : null,
    on: { click: () => pick.node(l.id), keydown: e => { if (e.key === "Enter") pick.node(l.id); else move(e, e.currentTarget); } } },
  el("td", {}, branchBox(l.id)), el("td", { class: "num", text: "#" + l.id }), el("td", { text: l.status }),
  el("td", { class: "num", text: fmt(l.reward) }), el("td", { class: "num", text: fmt(l.advantage) }),
  el("td", { class: "num", text: l.length }))));
}

// branchBox ticks a leaf for the side-by-side view of branches.
function branchBox(id) {
  const b = el("input", { type: "checkbox", "aria-label": "compare branch " + id, "data-branch": id,
    on: { click: e => e.stopPropagation(), change: e => {
      if (e.target.checked) tree.picked.add(id); else tree.picked.delete(id);
      $("branches-open").disabled = tree.picked.size < 2;
      $("branches-open").textContent = `side by side (${tree.picked.size})`;
    } } });
  b.checked = tree.picked.has(id);
  return b;
}
