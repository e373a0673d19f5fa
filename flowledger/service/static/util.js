// Small DOM helpers shared by the page's scripts. Everything is built with DOM calls and
// textContent: no HTML from data is ever parsed.
"use strict";

const $ = (sel) => document.querySelector(sel);

function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") node.addEventListener("click", v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : String(c ?? ""));
  return node;
}

function showError(err) {
  $("#error").textContent = err ? String(err.message || err) : "";
}

async function guarded(fn) {
  showError(null);
  try {
    await fn();
  } catch (err) {
    showError(err);
  }
}

function showTab(name) {
  document.querySelectorAll(".tab").forEach((t) => t.classList.toggle("active", t.dataset.tab === name));
  document.querySelectorAll(".panel").forEach((p) => p.classList.toggle("hidden", p.id !== "tab-" + name));
}

// Save bytes under a name (a blob URL clicked, as the page's downloads do).
function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = h("a", { href: url, download: name });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
