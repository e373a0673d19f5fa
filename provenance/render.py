"""Lineage as Graphviz DOT, and as SVG from a small layered layout (no graphviz needed)."""

from __future__ import annotations

from html import escape

from .lineage import Lineage, LineageNode


def _label(n: LineageNode) -> str:
    if n.kind == "EVENT":
        return f"{n.event_type} #{n.event_id}"
    return n.flowfile_uuid[:8]


def to_dot(lineage: Lineage) -> str:
    lines = ["digraph lineage {", "  rankdir=TB;", '  node [fontname="Helvetica"];']
    for n in lineage.nodes:
        shape = "box" if n.kind == "EVENT" else "ellipse"
        label = _label(n).replace('"', '\\"')
        lines.append(f'  "{n.id}" [shape={shape}, label="{label}"];')
    for e in lineage.edges:
        lines.append(f'  "{e.source}" -> "{e.target}" [tooltip="{e.flowfile_uuid}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def layers(lineage: Lineage) -> dict[str, int]:
    """Longest-path layer of every node (edges go forward in time, so the graph is a DAG)."""
    layer = {n.id: 0 for n in lineage.nodes}
    # Relax |nodes| times at most; a cycle (impossible from valid events) just stops early.
    for _ in range(len(layer)):
        changed = False
        for e in lineage.edges:
            if layer.get(e.target, 0) < layer.get(e.source, 0) + 1:
                layer[e.target] = layer[e.source] + 1
                changed = True
        if not changed:
            break
    return layer


W, H, GAP_X, GAP_Y, PAD = 150, 36, 30, 50, 20


def to_svg(lineage: Lineage) -> str:
    layer = layers(lineage)
    rows: dict[int, list[LineageNode]] = {}
    for n in lineage.nodes:
        rows.setdefault(layer[n.id], []).append(n)
    pos: dict[str, tuple[float, float]] = {}
    width_n = max((len(r) for r in rows.values()), default=1)
    width = PAD * 2 + width_n * W + (width_n - 1) * GAP_X
    for y_i, row in sorted(rows.items()):
        row_w = len(row) * W + (len(row) - 1) * GAP_X
        x0 = (width - row_w) / 2
        for x_i, n in enumerate(sorted(row, key=lambda n: (n.timestamp, n.id))):
            pos[n.id] = (x0 + x_i * (W + GAP_X), PAD + y_i * (H + GAP_Y))
    height = PAD * 2 + max(len(rows), 1) * (H + GAP_Y) - GAP_Y
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="Helvetica" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>',
    ]
    for e in lineage.edges:
        (x1, y1), (x2, y2) = pos[e.source], pos[e.target]
        out.append(
            f'<line x1="{x1 + W / 2:.0f}" y1="{y1 + H:.0f}" x2="{x2 + W / 2:.0f}" '
            f'y2="{y2:.0f}" stroke="#555" marker-end="url(#arrow)">'
            f"<title>{escape(e.flowfile_uuid)}</title></line>"
        )
    for n in lineage.nodes:
        x, y = pos[n.id]
        if n.kind == "EVENT":
            shape = (
                f'<rect x="{x:.0f}" y="{y:.0f}" width="{W}" height="{H}" rx="4" '
                'fill="#e8f0fe" stroke="#1a73e8"/>'
            )
        else:
            shape = (
                f'<ellipse cx="{x + W / 2:.0f}" cy="{y + H / 2:.0f}" rx="{W / 2:.0f}" '
                f'ry="{H / 2:.0f}" fill="#fef7e0" stroke="#f9ab00"/>'
            )
        out.append(
            f'<g id="{escape(n.id)}"><title>{escape(n.flowfile_uuid)}</title>{shape}'
            f'<text x="{x + W / 2:.0f}" y="{y + H / 2 + 4:.0f}" text-anchor="middle">'
            f"{escape(_label(n))}</text></g>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"
