// A FlowFile's lineage: draw it, expand parents/children of one event or of all of them,
// list the sources reached, show a node's details, and a time slider that hides the events
// after the chosen time (as NiFi's lineage slider).
"use strict";

const lineage = { nodes: new Map(), links: new Map(), selected: null, expanded: new Set(), until: null };
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

// The nodes shown: all of them, or those up to the slider's time.
function visible() {
  const all = [...lineage.nodes.values()];
  return lineage.until === null ? all : all.filter((n) => (n.millis ?? 0) <= lineage.until);
}

function redraw() {
  Graph.draw($("#graph"), visible(), [...lineage.links.values()], selectNode, lineage.selected);
  GraphTools.apply();
}

// The slider spans the lineage's times; at its right end everything is shown.
function resetSlider() {
  const times = [...lineage.nodes.values()].map((n) => n.millis ?? 0);
  const slider = $("#time-slider");
  slider.min = String(Math.min(...times));
  slider.max = String(Math.max(...times));
  slider.value = slider.max;
  lineage.until = null;
  $("#time-label").textContent = "all events";
}

function slide() {
  const slider = $("#time-slider");
  const at = Number(slider.value);
  lineage.until = at >= Number(slider.max) ? null : at;
  $("#time-label").textContent = lineage.until === null ? "all events" : new Date(at).toISOString().replace("T", " ");
  redraw();
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
    GraphTools.reset();
    resetSlider();
    redraw();
    $("#lineage-actions").classList.remove("hidden");
    $("#graph-tools").classList.remove("hidden");
    $("#sources").replaceChildren();
    $("#lineage-record").textContent = "";
    $("#details").replaceChildren(h("p", { class: "muted" }, "Click a node for its attributes and content."));
  });
}

async function expand(eventId, kind) {
  await guarded(async () => {
    lineage.expanded.add(kind + ":" + eventId);
    merge(await submitLineage({ lineageRequestType: kind, eventId }));
    resetSlider();
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
    resetSlider();
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
      `${e.eventType} ${e.transitUri || e.componentName}`))),
    starts.length > shown.length ? h("p", { class: "muted" }, `first ${shown.length} shown`) : "",
  );
}

function replayed(done) {
  $("#replay-status").replaceChildren(
    `replayed as event ${done.eventId}, FlowFile `,
    h("button", { class: "link replayed", onclick: () => openLineage(done.flowFileUuid) }, done.flowFileUuid),
  );
}

async function selectNode(node) {
  lineage.selected = node.id;
  Graph.select($("#graph"), node.id);
  const box = $("#details");
  if (node.type !== "EVENT") {
    box.replaceChildren(h("h2", {}, "FlowFile"), h("p", { class: "mono" }, node.flowFileUuid));
    return;
  }
  // Cleared first: what waits for this event's details never sees the previous event's.
  box.replaceChildren(h("p", { class: "muted" }, `loading event ${node.id}…`));
  await guarded(async () => {
    const e = (await Api.json("GET", `/nifi-api/provenance-events/${node.id}`)).provenanceEvent;
    const actions = [];
    if (e.parentUuids.length) {
      actions.push(h("button", { class: "expand-parents", onclick: () => expand(e.eventId, "PARENTS") }, "Expand parents"));
    }
    if (e.childUuids.length) {
      actions.push(h("button", { class: "expand-children", onclick: () => expand(e.eventId, "CHILDREN") }, "Expand children"));
    }
    Details.show(box, e, actions, replayed);
  });
}

// Beyond NiFi: a table's record, by key -> the commit that last wrote it -> the file slice
// it wrote -> that slice's lineage, expanded to the raw inputs.
async function traceRecord(table, key) {
  const status = $("#record-status");
  status.textContent = "looking up…";
  const found = await Api.json("GET", `/tables/${encodeURIComponent(table)}/records?key=${encodeURIComponent(key)}`);
  if (!found.slices.length) throw new Error(`commit ${found.commitTime} recorded no provenance for its files`);
  const slice = found.slices[0];
  status.textContent = `key ${key}: commit ${found.commitTime}, file ${slice.filename || slice.transitUri}`;
  await openLineage(slice.flowFileUuid);
  $("#lineage-record").textContent = `record ${key} of ${table} · commit ${found.commitTime}`;
  await expandAll("PARENTS");
}
