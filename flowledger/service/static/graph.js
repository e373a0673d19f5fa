// A small layered layout drawn as inline SVG: nodes are placed in rows by their longest
// path from a source (lineage graphs are DAGs ordered by time), spread evenly in each row.
"use strict";

const Graph = (() => {
  const SVG = "http://www.w3.org/2000/svg";
  const ROW = 90;
  const COL = 170;
  const MIN_COL = 70;

  function el(name, attrs, text) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function layout(nodes, links) {
    const byId = new Map(nodes.map((n) => [n.id, n]));
    const incoming = new Map(nodes.map((n) => [n.id, []]));
    for (const l of links) {
      if (byId.has(l.sourceId) && byId.has(l.targetId)) incoming.get(l.targetId).push(l.sourceId);
    }
    const depth = new Map();
    const visiting = new Set();
    function d(id) {
      if (depth.has(id)) return depth.get(id);
      if (visiting.has(id)) return 0; // a cycle cannot happen in lineage; stay safe anyway
      visiting.add(id);
      const preds = incoming.get(id) || [];
      const v = preds.length ? 1 + Math.max(...preds.map(d)) : 0;
      visiting.delete(id);
      depth.set(id, v);
      return v;
    }
    nodes.forEach((n) => d(n.id));
    const rows = [];
    const sorted = [...nodes].sort((a, b) => (a.millis || 0) - (b.millis || 0) || (a.id < b.id ? -1 : 1));
    for (const n of sorted) {
      const r = depth.get(n.id);
      (rows[r] = rows[r] || []).push(n);
    }
    // Within a row, order nodes by where their predecessors are (one barycentre pass, top
    // down): fewer crossing edges than time order alone.
    const slot = new Map();
    rows.forEach((row) => {
      if (!row) return;
      const key = (n) => {
        const preds = (incoming.get(n.id) || []).filter((p) => slot.has(p));
        return preds.length ? preds.reduce((a, p) => a + slot.get(p), 0) / preds.length : Infinity;
      };
      const keys = new Map(row.map((n, i) => [n.id, [key(n), i]]));
      row.sort((a, b) => {
        const [ka, ia] = keys.get(a.id);
        const [kb, ib] = keys.get(b.id);
        return ka === kb ? ia - ib : (ka === Infinity ? 1 : kb === Infinity ? -1 : ka - kb);
      });
      row.forEach((n, i) => slot.set(n.id, (i + 0.5) / row.length));
    });
    // Wide rows (a FORK into hundreds of FlowFiles) get narrower columns, so a lineage of a
    // few hundred nodes stays one scrollable picture rather than a strip kilometres long.
    const widest = Math.max(1, ...rows.map((r) => (r ? r.length : 0)));
    const col = Math.max(MIN_COL, Math.min(COL, Math.floor(4000 / widest)));
    const width = widest * col;
    const pos = new Map();
    rows.forEach((row, r) => {
      if (!row) return;
      const offset = (width - row.length * col) / 2;
      row.forEach((n, i) => pos.set(n.id, { x: offset + i * col + col / 2, y: r * ROW + 40 }));
    });
    return { pos, width, height: rows.length * ROW + 40, col };
  }

  function draw(svg, nodes, links, onClick, selected) {
    svg.replaceChildren();
    const { pos, width, height, col } = layout(nodes, links);
    const box = Math.min(124, col - 10);
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("width", width);
    svg.setAttribute("height", height);
    svg.dataset.width = String(width); // the drawing's own size, which zoom scales
    svg.dataset.height = String(height);
    const defs = el("defs");
    const marker = el("marker", {
      id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5",
      markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse",
    });
    marker.appendChild(el("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }));
    defs.appendChild(marker);
    svg.appendChild(defs);
    for (const l of links) {
      const a = pos.get(l.sourceId);
      const b = pos.get(l.targetId);
      if (!a || !b) continue;
      const line = el("line", {
        x1: a.x, y1: a.y + 16, x2: b.x, y2: b.y - 18,
        class: "edge", "marker-end": "url(#arrow)",
        "data-source": l.sourceId, "data-target": l.targetId,
      });
      line.appendChild(el("title", {}, l.flowFileUuid));
      svg.appendChild(line);
    }
    for (const n of nodes) {
      const p = pos.get(n.id);
      const g = el("g", {
        class: "node " + (n.type === "EVENT" ? "event" : "flowfile") +
          (n.id === selected ? " selected" : ""),
        transform: `translate(${p.x},${p.y})`,
        "data-node-id": n.id,
        "data-event-type": n.eventType || "",
        tabindex: "0",
      });
      if (n.type === "EVENT") {
        g.appendChild(el("rect", { x: -box / 2, y: -16, width: box, height: 32, rx: 8 }));
        g.appendChild(el("text", { y: 5 }, n.eventType));
        g.appendChild(el("title", {}, `event ${n.eventId} · ${n.timestamp}`));
      } else {
        g.appendChild(el("circle", { r: 14 }));
        g.appendChild(el("text", { y: 32, class: "uuid" }, n.flowFileUuid.slice(0, 18)));
        g.appendChild(el("title", {}, `FlowFile ${n.flowFileUuid}`));
      }
      g.addEventListener("click", () => onClick(n));
      g.addEventListener("keydown", (e) => { if (e.key === "Enter") onClick(n); });
      svg.appendChild(g);
    }
  }

  // Mark one node selected without drawing again: the clicked (or focused) node stays the
  // same element, so keyboard focus stays on it and a click never lands on a removed node.
  function select(svg, id) {
    svg.querySelectorAll("g.node").forEach((g) => g.classList.toggle("selected", g.dataset.nodeId === String(id)));
  }

  return { draw, select };
})();
