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
}

// -- search -------------------------------------------------------------------------------
function utc(localValue) {
  return localValue ? localValue + "Z" : undefined; // the inputs are read as UTC
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
  const entity = (await Api.json("POST", "/nifi-api/provenance", { provenance: { request } })).provenance;
  const events = entity.results.provenanceEvents;
  $("#search-summary").textContent = `${entity.results.totalCount} events`;
  $("#events tbody").replaceChildren(
    ...events.map((e) =>
      h("tr", { "data-event-id": e.eventId },
        h("td", { class: "mono" }, e.eventId),
        h("td", { class: "mono" }, e.eventTime),
        h("td", {}, e.eventType),
        h("td", { class: "mono" }, e.flowFileUuid),
        h("td", {}, e.componentId),
        h("td", {}, e.fileSizeBytes),
        h("td", {}, h("button", { class: "show-lineage", onclick: () => openLineage(e.flowFileUuid) }, "Lineage")),
      ),
    ),
  );
  Api.json("DELETE", entity.uri).catch(() => {}); // NiFi's clients delete a query once read
}

// -- lineage ------------------------------------------------------------------------------
const lineage = { nodes: new Map(), links: new Map(), selected: null };

function merge(results) {
  for (const n of results.nodes) lineage.nodes.set(n.id, n);
  for (const l of results.links) lineage.links.set(l.sourceId + ">" + l.targetId, l);
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
    lineage.selected = null;
    merge(results);
    redraw();
    $("#details").replaceChildren(h("p", { class: "muted" }, "Click a node for its attributes and content."));
  });
}

async function expand(eventId, kind) {
  await guarded(async () => {
    merge(await submitLineage({ lineageRequestType: kind, eventId }));
    redraw();
  });
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
    const e = (await Api.json("GET", `/nifi-api/provenance-events/${node.eventId}`)).provenanceEvent;
    const fields = [
      ["event id", e.eventId], ["type", e.eventType], ["time", e.eventTime],
      ["FlowFile", e.flowFileUuid], ["component", `${e.componentId} (${e.componentType})`],
      ["size", e.fileSizeBytes], ["transit URI", e.transitUri], ["details", e.details],
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

Api.takeTokenFromFragment();
if (Api.token()) guarded(connect);
