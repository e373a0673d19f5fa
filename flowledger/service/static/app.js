// The provenance page: connect, search events (every field NiFi searches), a table's timeline
// and the wiring of the page's controls. Lineage is in lineage.js, event details in details.js.
"use strict";

// -- connect ------------------------------------------------------------------------------
async function connect() {
  const tables = await Api.json("GET", "/tables");
  $("#status").textContent = "connected";
  const select = $("#table-name");
  select.replaceChildren(...tables.map((t) => h("option", { value: t }, t)));
  await latest(); // as NiFi's page: the latest events, before any search
}

// -- search -------------------------------------------------------------------------------
const TERMS = ["FlowFileUUID", "ProcessorID", "EventType", "Filename", "TransitURI",
  "AlternateIdentifierURI", "Relationship", "Details"];

function utc(localValue) {
  return localValue ? localValue + "Z" : undefined; // the inputs are read as UTC
}

async function latest() {
  await query({ searchTerms: {}, maxResults: 100 }, "latest");
}

// `name=value` lines: each searches that attribute (NiFi's indexed attributes).
function attributeTerms(text) {
  const terms = {};
  for (const line of (text || "").split(/\r?\n|;/)) {
    const at = line.indexOf("=");
    if (!line.trim()) continue;
    if (at < 1) throw new Error(`attribute search "${line.trim()}": write name=value`);
    terms[line.slice(0, at).trim()] = { value: line.slice(at + 1).trim() };
  }
  return terms;
}

async function search(form) {
  const data = new FormData(form);
  const terms = attributeTerms(data.get("attributes"));
  for (const key of TERMS) {
    const v = (data.get(key) || "").trim();
    if (v) terms[key] = { value: v };
  }
  const request = { searchTerms: terms, maxResults: Number(data.get("maxResults") || 100) };
  if (data.get("startDate")) request.startDate = utc(data.get("startDate"));
  if (data.get("endDate")) request.endDate = utc(data.get("endDate"));
  for (const key of ["minimumFileSize", "maximumFileSize"]) {
    const v = (data.get(key) || "").trim();
    if (v) request[key] = /^\d+$/.test(v) ? Number(v) : v; // bytes, or NiFi's "1 MB"
  }
  await query(request, "found");
}

function eventRow(e) {
  return h("tr", { "data-event-id": e.eventId },
    h("td", { class: "mono" }, e.eventId),
    h("td", { class: "mono" }, e.eventTime),
    h("td", {}, e.eventType),
    h("td", { class: "mono" }, e.flowFileUuid),
    h("td", { class: "filename" }, e.filename ?? ""),
    h("td", { class: "mono uri" }, e.transitUri ?? ""),
    h("td", { class: "component", title: e.componentId }, e.componentName),
    h("td", {}, e.fileSize),
    h("td", {}, h("button", { class: "show-lineage", onclick: () => openLineage(e.flowFileUuid) }, "Lineage")),
  );
}

async function query(fields, what) {
  // What NiFi's page posts: a summary of each event is all the table needs.
  const request = { ...fields, summarize: true, incrementalResults: false };
  const entity = (await Api.json("POST", "/nifi-api/provenance", { provenance: { request } })).provenance;
  const events = entity.results.provenanceEvents;
  $("#search-summary").textContent = what === "latest"
    ? `the latest ${events.length} events (newest first)`
    : `${entity.results.total} events found`;
  $("#events tbody").replaceChildren(...events.map(eventRow));
  Api.json("DELETE", entity.uri).catch(() => {}); // NiFi's clients delete a query once read
}

// -- timeline -----------------------------------------------------------------------------
async function timeline() {
  const name = $("#table-name").value;
  if (!name) throw new Error("no table in this repository");
  const archived = $("#archived").checked;
  const answer = await Api.json("GET", `/tables/${encodeURIComponent(name)}/timeline?archived=${archived}`);
  $("#instants tbody").replaceChildren(
    ...answer.instants.map((i) =>
      h("tr", { "data-action": i.action },
        h("td", { class: "mono" }, i.instant_time),
        h("td", {}, i.action),
        h("td", { class: "state-" + i.state }, i.state),
        h("td", {}, i.timeline || "active"),
        h("td", {}, i.operation || i.target || ""),
        h("td", { class: "files" }, i.files_added ?? i.files_deleted ?? ""),
        h("td", { class: "log-files" }, i.log_files ?? ""),
        h("td", { class: "rows" }, i.rows ?? ""),
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
$("#timeline-form").addEventListener("submit", (e) => { e.preventDefault(); guarded(timeline); });
$("#record-form").addEventListener("submit", (e) => {
  e.preventDefault();
  guarded(() => traceRecord($("#table-name").value, $("#record-key").value.trim()));
});
$("#expand-ancestors").addEventListener("click", () => expandAll("PARENTS"));
$("#expand-descendants").addEventListener("click", () => expandAll("CHILDREN"));
$("#zoom-in").addEventListener("click", () => GraphTools.zoom(GraphTools.STEP));
$("#zoom-out").addEventListener("click", () => GraphTools.zoom(1 / GraphTools.STEP));
$("#zoom-fit").addEventListener("click", () => GraphTools.fit());
$("#export-svg").addEventListener("click", () => GraphTools.exportSvg("lineage-" + $("#lineage-uuid").value));
$("#export-png").addEventListener("click", () => guarded(() => GraphTools.exportPng("lineage-" + $("#lineage-uuid").value)));
$("#time-slider").addEventListener("input", slide);

Api.takeTokenFromFragment();
if (Api.token()) guarded(connect);
