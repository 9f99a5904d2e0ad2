"""The learning curves of train.py's runs as an SVG (standard library only): per
mode, the evaluated success against env steps played, mean over seeds (solid:
actions sampled, with a band of +- one standard deviation; dashed: greedy),
each run interpolated between its own steps up to the fewest env steps any
run of the mode reached."""

from __future__ import annotations

import statistics
from typing import Dict, List, Sequence, Tuple

COLOURS = {"patr": "#1f77b4", "grpo": "#ff7f0e"}
W, H, LEFT, RIGHT, TOP, BOTTOM = 720, 420, 60, 20, 40, 50


def _interp(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    if x <= xs[0]:
        return ys[0]
    for i in range(1, len(xs)):
        if x <= xs[i]:
            t = (x - xs[i - 1]) / (xs[i] - xs[i - 1]) if xs[i] > xs[i - 1] else 1.0
            return ys[i - 1] + t * (ys[i] - ys[i - 1])
    return ys[-1]


def bands(records: List[Dict], mode: str, key: str, points: int = 60) -> List[Tuple[float, float, float]]:
    """(env steps, mean, sd) of ``key`` over the mode's seeds on a grid; each curve
    starts at (0, its first evaluation)."""
    runs: Dict[int, List[Dict]] = {}
    for r in records:
        if r["mode"] == mode:
            runs.setdefault(r["seed"], []).append(r)
    if not runs:
        return []
    curves = []
    for rs in runs.values():
        rs.sort(key=lambda r: r["step"])
        curves.append(([0.0] + [float(r["env_steps"]) for r in rs], [rs[0][key]] + [r[key] for r in rs]))
    end = min(c[0][-1] for c in curves)
    out = []
    for i in range(points + 1):
        x = end * i / points
        ys = [_interp(cx, cy, x) for cx, cy in curves]
        out.append((x, statistics.mean(ys), statistics.stdev(ys) if len(ys) > 1 else 0.0))
    return out


def write_svg(path: str, records: List[Dict], modes: Sequence[str], title: str) -> None:
    series = {(m, k): bands(records, m, k) for m in modes for k in ("eval_sampled", "eval_greedy")}
    xmax = max((b[-1][0] for b in series.values() if b), default=1.0) or 1.0
    px = lambda x: LEFT + (W - LEFT - RIGHT) * x / xmax  # noqa: E731
    py = lambda y: TOP + (H - TOP - BOTTOM) * (1 - y)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>']
    for i in range(6):
        y = i / 5
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:.1f}</text>')
    for i in range(6):
        x = xmax * i / 5
        out.append(f'<text x="{px(x):.1f}" y="{H - BOTTOM + 18}" text-anchor="middle">{int(round(x))}</text>')
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 10}" text-anchor="middle">env steps played</text>')
    out.append(f'<text x="16" y="{(TOP + H - BOTTOM) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {(TOP + H - BOTTOM) / 2})">success (evaluated)</text>')
    for (mode, key), b in series.items():
        if not b:
            continue
        c = COLOURS.get(mode, "#444")
        if key == "eval_sampled":  # a greedy walk succeeds or not: its band would fill the plot
            upper = " ".join(f"{px(x):.1f},{py(min(m + s, 1)):.1f}" for x, m, s in b)
            lower = " ".join(f"{px(x):.1f},{py(max(m - s, 0)):.1f}" for x, m, s in reversed(b))
            out.append(f'<polygon points="{upper} {lower}" fill="{c}" fill-opacity="0.15" stroke="none"/>')
        dash = ' stroke-dasharray="6 4"' if key == "eval_greedy" else ""
        line = " ".join(f"{px(x):.1f},{py(m):.1f}" for x, m, _ in b)
        out.append(f'<polyline points="{line}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
    for i, mode in enumerate(modes):
        c = COLOURS.get(mode, "#444")
        y = H - BOTTOM - 16 - 18 * (len(modes) - 1 - i)
        x = W - RIGHT - 280
        out.append(f'<line x1="{x}" x2="{x + 30}" y1="{y}" y2="{y}" stroke="{c}" stroke-width="2"/>')
        out.append(f'<text x="{x + 36}" y="{y + 4}">{mode}: sampled (solid), greedy (dashed)</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
