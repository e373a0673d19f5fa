// The lineage page: search events, draw a FlowFile's lineage, show a table's timeline.
// Everything is built with DOM calls and textContent (no HTML from data is ever parsed).
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

// -- connect ------------------------------------------------------------------------------
async function connect() {
  const tables = await Api.json("GET", "/tables");
  $("#status").textContent = "connected";
  const select = $("#table-name");
  select.replaceChildren(...tables.map((t) => h("option", { value: t }, t)));
  await latest(); // as NiFi's page: the latest events, before any search
}

// -- search -------------------------------------------------------------------------------
function utc(localValue) {
  return localValue ? localValue + "Z" : undefined; // the inputs are read as UTC
}

async function latest() {
  await query({ searchTerms: {}, maxResults: 100 }, "latest");
}

async function search(form) {
  const data = new FormData(form);
  const terms = {};
  for (const key of ["FlowFileUUID", "ProcessorID", "EventType"]) {
    const v = (data.get(key) || "").trim();
    if (v) terms[key] = { value: v };
  }
  const request = { searchTerms: terms, maxResults: Number(data.get("maxResults") || 100) };
  if (data.get("startDate")) request.startDate = utc(data.get("startDate"));
  if (data.get("endDate")) request.endDate = utc(data.get("endDate"));
  await query(request, "found");
}

async function query(fields, what) {
  // What NiFi's page posts: a summary of each event is all the table needs.
  const request = { ...fields, summarize: true, incrementalResults: false };
  const entity = (await Api.json("POST", "/nifi-api/provenance", { provenance: { request } })).provenance;
  const events = entity.results.provenanceEvents;
  $("#search-summary").textContent = what === "latest"
    ? `the latest ${events.length} events (newest first)`
    : `${entity.results.total} events found`;
  $("#events tbody").replaceChildren(
    ...events.map((e) =>
      h("tr", { "data-event-id": e.eventId },
        h("td", { class: "mono" }, e.eventId),
        h("td", { class: "mono" }, e.eventTime),
        h("td", {}, e.eventType),
        h("td", { class: "mono" }, e.flowFileUuid),
        h("td", {}, e.componentId),
        h("td", {}, e.fileSize),
        h("td", {}, h("button", { class: "show-lineage", onclick: () => openLineage(e.flowFileUuid) }, "Lineage")),
      ),
    ),
  );
  Api.json("DELETE", entity.uri).catch(() => {}); // NiFi's clients delete a query once read
}

// -- lineage ------------------------------------------------------------------------------
const lineage = { nodes: new Map(), links: new Map(), selected: null, expanded: new Set() };
const LINKING = new Set(["FORK", "JOIN", "CLONE", "REPLAY"]);
const SOURCES = new Set(["RECEIVE", "FETCH", "CREATE"]);
const MAX_EXPANSIONS = 500; // a lineage of a few hundred nodes stays usable

function merge(results) {
  let added = 0;
  for (const n of results.nodes) {
    if (!lineage.nodes.has(n.id)) added += 1;
    lineage.nodes.set(n.id, n);
  }
  for (const l of results.links) lineage.links.set(l.sourceId + ">" + l.targetId, l);
  return added;
}

function redraw() {
  Graph.draw($("#graph"), [...lineage.nodes.values()], [...lineage.links.values()], selectNode, lineage.selected);
}

async function submitLineage(request) {
  const entity = (await Api.json("POST", "/nifi-api/provenance/lineage", { lineage: { request } })).lineage;
  Api.json("DELETE", entity.uri).catch(() => {});
  return entity.results;
}

async function openLineage(uuid) {
  showTab("lineage");
  $("#lineage-uuid").value = uuid;
  await guarded(async () => {
    const results = await submitLineage({ lineageRequestType: "FLOWFILE", uuid });
    lineage.nodes.clear();
    lineage.links.clear();
    lineage.expanded.clear();
    lineage.selected = null;
    merge(results);
    redraw();
    $("#lineage-actions").classList.remove("hidden");
    $("#sources").replaceChildren();
    $("#details").replaceChildren(h("p", { class: "muted" }, "Click a node for its attributes and content."));
  });
}

async function expand(eventId, kind) {
  await guarded(async () => {
    lineage.expanded.add(kind + ":" + eventId);
    merge(await submitLineage({ lineageRequestType: kind, eventId }));
    redraw();
  });
}

// NiFi's page expands one FORK/JOIN/CLONE/REPLAY at a time; this repeats PARENTS (or CHILDREN)
// on every such event until nothing new appears, a few requests at a time, so the lineage of a
// curated file reaches the raw inputs it came from in one click.
async function expandAll(kind) {
  await guarded(async () => {
    const status = $("#expand-status");
    status.textContent = "expanding…";
    let requests = 0;
    for (;;) {
      const wave = [...lineage.nodes.values()].filter((n) =>
        n.type === "EVENT" && LINKING.has(n.eventType) &&
        (kind === "PARENTS" ? n.parentUuids.length : n.childUuids.length) &&
        !lineage.expanded.has(kind + ":" + n.eventId));
      if (!wave.length) break;
      if (requests + wave.length > MAX_EXPANSIONS) {
        throw new Error(`stopped after ${requests} expansions (at most ${MAX_EXPANSIONS})`);
      }
      for (let i = 0; i < wave.length; i += 4) {
        const batch = wave.slice(i, i + 4);
        batch.forEach((n) => lineage.expanded.add(kind + ":" + n.eventId));
        const answers = await Promise.all(batch.map((n) => submitLineage({ lineageRequestType: kind, eventId: n.eventId })));
        answers.forEach(merge);
        requests += batch.length;
        status.textContent = `expanding: ${requests} requests, ${lineage.nodes.size} nodes`;
      }
    }
    redraw();
    status.textContent = `${lineage.nodes.size} nodes, ${lineage.links.size} links`;
    if (kind === "PARENTS") await showSources();
  });
}

// Where it came from: the transit URIs of the RECEIVE/FETCH events (and the CREATEs) reached.
async function showSources() {
  const starts = [...lineage.nodes.values()].filter((n) => n.type === "EVENT" && SOURCES.has(n.eventType));
  const shown = starts.slice(0, 50);
  const events = await Promise.all(shown.map(async (n) =>
    (await Api.json("GET", `/nifi-api/provenance-events/${n.id}`)).provenanceEvent));
  $("#sources").replaceChildren(
    h("h2", {}, `Sources (${starts.length})`),
    h("ul", {}, ...events.map((e) => h("li", { class: "mono source", "data-event-id": e.id },
      `${e.eventType} ${e.transitUri || e.componentId}`))),
    starts.length > shown.length ? h("p", { class: "muted" }, `first ${shown.length} shown`) : "",
  );
}

function contentRow(e, direction) {
  const available = e[direction + "ContentAvailable"];
  const claim = e[direction + "ContentClaim"];
  const cells = [h("dt", {}, direction), h("dd", {},
    h("span", { class: "badge " + (available ? "yes" : "no") }, available ? "available" : claim ? "gone" : "none"))];
  if (available) {
    cells[1].append(" ", h("button", {
      class: "download-" + direction,
      onclick: () => guarded(() => Api.download(`/nifi-api/provenance-events/${e.eventId}/content/${direction}`,
        `event-${e.eventId}-${direction}`)),
    }, "Download"));
  }
  return cells;
}

async function selectNode(node) {
  lineage.selected = node.id;
  redraw();
  const box = $("#details");
  if (node.type !== "EVENT") {
    box.replaceChildren(h("h2", {}, "FlowFile"), h("p", { class: "mono" }, node.flowFileUuid));
    return;
  }
  await guarded(async () => {
    const e = (await Api.json("GET", `/nifi-api/provenance-events/${node.id}`)).provenanceEvent;
    const fields = [
      ["event id", e.eventId], ["type", e.eventType], ["time", e.eventTime],
      ["FlowFile", e.flowFileUuid], ["component", `${e.componentId} (${e.componentType})`],
      ["size", `${e.fileSize} (${e.fileSizeBytes} bytes)`], ["transit URI", e.transitUri], ["details", e.details],
      ["relationship", e.relationship],
    ].filter(([, v]) => v !== null && v !== undefined && v !== "");
    const attrs = h("table", { class: "grid attributes" },
      h("thead", {}, h("tr", {}, h("th", {}, "attribute"), h("th", {}, "value"), h("th", {}, "previous"))),
      h("tbody", {}, ...e.attributes.map((a) =>
        h("tr", {}, h("td", { class: "mono" }, a.name), h("td", {}, a.value ?? ""), h("td", { class: "muted" }, a.previousValue ?? "")))),
    );
    const actions = h("div", { class: "actions" });
    if (e.parentUuids.length) {
      actions.append(h("button", { class: "expand-parents", onclick: () => expand(e.eventId, "PARENTS") }, "Expand parents"));
    }
    if (e.childUuids.length) {
      actions.append(h("button", { class: "expand-children", onclick: () => expand(e.eventId, "CHILDREN") }, "Expand children"));
    }
    box.replaceChildren(
      h("h2", { id: "details-title" }, `Event ${e.eventId} · ${e.eventType}`),
      h("dl", {}, ...fields.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      h("h2", {}, "Content"),
      h("dl", { class: "content" }, ...contentRow(e, "input"), ...contentRow(e, "output")),
      actions,
      h("h2", {}, "Attributes"),
      attrs,
    );
  });
}

// -- timeline -----------------------------------------------------------------------------
async function timeline(form) {
  const name = $("#table-name").value;
  if (!name) throw new Error("no table in this repository");
  const archived = $("#archived").checked;
  const answer = await Api.json("GET", `/tables/${encodeURIComponent(name)}/timeline?archived=${archived}`);
  $("#instants tbody").replaceChildren(
    ...answer.instants.map((i) =>
      h("tr", {},
        h("td", { class: "mono" }, i.instant_time),
        h("td", {}, i.action),
        h("td", { class: "state-" + i.state }, i.state),
        h("td", {}, i.timeline || "active"),
        h("td", {}, i.operation || i.target || ""),
        h("td", {}, i.files_added ?? i.files_deleted ?? ""),
        h("td", {}, i.rows ?? ""),
      ),
    ),
  );
}

// -- wiring -------------------------------------------------------------------------------
document.querySelectorAll(".tab").forEach((t) => t.addEventListener("click", () => showTab(t.dataset.tab)));
$("#token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  Api.setToken($("#token").value);
  $("#token").value = "";
  guarded(connect);
});
$("#search-form").addEventListener("submit", (e) => { e.preventDefault(); guarded(() => search(e.target)); });
$("#lineage-form").addEventListener("submit", (e) => { e.preventDefault(); openLineage($("#lineage-uuid").value.trim()); });
$("#timeline-form").addEventListener("submit", (e) => { e.preventDefault(); guarded(() => timeline(e.target)); });
$("#expand-ancestors").addEventListener("click", () => expandAll("PARENTS"));
$("#expand-descendants").addEventListener("click", () => expandAll("CHILDREN"));

Api.takeTokenFromFragment();
if (Api.token()) guarded(connect);
