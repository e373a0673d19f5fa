// The lineage graph's tools: zoom in/out, fit to the pane, and export as SVG or PNG (the
// picture as drawn, its styles inlined so the file stands alone).
"use strict";

const GraphTools = (() => {
  const STEP = 1.25;
  const MIN = 0.05;
  const MAX = 4;
  const STYLED = ["fill", "stroke", "stroke-width", "font-size", "font-weight", "font-family", "text-anchor"];
  let scale = 1;

  function svg() {
    return document.getElementById("graph");
  }

  function natural() {
    const s = svg();
    return { w: Number(s.dataset.width || 0), h: Number(s.dataset.height || 0) };
  }

  // Applied after every redraw: the drawing keeps its viewBox, its size is scaled.
  function apply() {
    const { w, h: ht } = natural();
    if (!w) return;
    svg().setAttribute("width", Math.max(1, Math.round(w * scale)));
    svg().setAttribute("height", Math.max(1, Math.round(ht * scale)));
    svg().dataset.scale = String(scale);
  }

  function zoom(factor) {
    scale = Math.min(MAX, Math.max(MIN, scale * factor));
    apply();
  }

  function fit() {
    const { w, h: ht } = natural();
    const wrap = document.getElementById("graph-wrap");
    if (!w || !ht) return;
    const room = Math.max(420, window.innerHeight - wrap.getBoundingClientRect().top - 24);
    scale = Math.min(MAX, Math.max(MIN, Math.min((wrap.clientWidth - 8) / w, room / ht)));
    apply();
  }

  // A copy of the drawing with every style it got from the page's CSS written on it.
  function standalone() {
    const original = svg();
    const copy = original.cloneNode(true);
    const from = original.querySelectorAll("*");
    const to = copy.querySelectorAll("*");
    from.forEach((node, i) => {
      const style = getComputedStyle(node);
      const own = STYLED.map((p) => `${p}:${style.getPropertyValue(p)}`).join(";");
      to[i].setAttribute("style", own);
    });
    const { w, h: ht } = natural();
    copy.setAttribute("width", w);
    copy.setAttribute("height", ht);
    copy.setAttribute("xmlns", "http://www.w3.org/2000/svg");
    const bg = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    copy.insertBefore(bg, copy.firstChild);
    bg.setAttribute("width", "100%");
    bg.setAttribute("height", "100%");
    bg.setAttribute("fill", "#ffffff");
    return new XMLSerializer().serializeToString(copy);
  }

  function exportSvg(name) {
    saveBlob(new Blob([standalone()], { type: "image/svg+xml" }), name + ".svg");
  }

  async function exportPng(name) {
    const { w, h: ht } = natural();
    const url = URL.createObjectURL(new Blob([standalone()], { type: "image/svg+xml" }));
    try {
      const img = new Image();
      await new Promise((ok, fail) => {
        img.onload = ok;
        img.onerror = () => fail(new Error("the graph could not be drawn as an image"));
        img.src = url;
      });
      const canvas = document.createElement("canvas");
      const ratio = Math.min(2, 16000 / Math.max(w, ht)); // browsers cap a canvas's side
      canvas.width = Math.round(w * ratio);
      canvas.height = Math.round(ht * ratio);
      const ctx = canvas.getContext("2d");
      ctx.scale(ratio, ratio);
      ctx.drawImage(img, 0, 0, w, ht);
      const blob = await new Promise((ok) => canvas.toBlob(ok, "image/png"));
      saveBlob(blob, name + ".png");
    } finally {
      URL.revokeObjectURL(url);
    }
  }

  function reset() {
    scale = 1;
  }

  return { apply, zoom, fit, reset, exportSvg, exportPng, STEP };
})();
