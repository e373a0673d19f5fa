// An event's details, as NiFi's "Provenance Event" dialog: its fields, attributes (with their
// previous values), its input and output content (View inline, size-capped, or Download) and
// Replay. `Details.show(box, event, actions)` fills the aside.
"use strict";

const Details = (() => {
  const VIEW_BYTES = 64 * 1024; // what the inline viewer shows at most (one ranged GET)
  const CSV_ROWS = 200;

  function contentPath(e, direction) {
    return `/nifi-api/provenance-events/${e.eventId}/content/${direction}`;
  }

  function kindOf(type, name) {
    const n = (name || "").toLowerCase();
    if (/json/.test(type) || n.endsWith(".json") || n.endsWith(".jsonl")) return "json";
    if (/csv/.test(type) || n.endsWith(".csv")) return "csv";
    return "text";
  }

  // A CSV line's fields (quotes as RFC 4180: "" is a quote inside a quoted field).
  function csvFields(line) {
    const out = [];
    let cur = "", quoted = false;
    for (let i = 0; i < line.length; i += 1) {
      const c = line[i];
      if (quoted) {
        if (c === '"' && line[i + 1] === '"') { cur += '"'; i += 1; }
        else if (c === '"') quoted = false;
        else cur += c;
      } else if (c === '"') quoted = true;
      else if (c === ",") { out.push(cur); cur = ""; }
      else cur += c;
    }
    out.push(cur);
    return out;
  }

  function csvTable(text) {
    const lines = text.split(/\r?\n/).filter((l) => l.length).slice(0, CSV_ROWS + 1);
    const [head, ...rows] = lines.map(csvFields);
    return h("table", { class: "grid csv" },
      h("thead", {}, h("tr", {}, ...(head || []).map((c) => h("th", {}, c)))),
      h("tbody", {}, ...rows.map((r) => h("tr", {}, ...r.map((c) => h("td", {}, c))))));
  }

  // Without a type or a name that says so, text that starts as JSON is tried as JSON.
  function sniffed(kind, text) {
    return kind === "text" && /^\s*[[{]/.test(text) ? "json" : kind;
  }

  function rendered(kind, text, complete) {
    if (kind === "json" && complete) {
      try {
        return h("pre", { class: "content-text json" }, JSON.stringify(JSON.parse(text), null, 2));
      } catch (e) { /* JSON lines or not JSON: shown as text */ }
    }
    if (kind === "csv") return csvTable(text);
    return h("pre", { class: "content-text" }, text);
  }

  async function view(e, direction, where) {
    const name = (direction === "input"
      ? (e.attributes.find((a) => a.name === "filename") || {}).previousValue
      : (e.attributes.find((a) => a.name === "filename") || {}).value) || "";
    const got = await Api.peek(contentPath(e, direction), VIEW_BYTES);
    const complete = got.bytes.length >= got.total;
    let text;
    try {
      text = new TextDecoder("utf-8", { fatal: complete }).decode(got.bytes);
      if (text.includes("\u0000")) throw new Error("binary");
    } catch (err) {
      where.replaceChildren(h("p", { class: "muted" }, `binary content, ${got.total} bytes: download it to see it`));
      return;
    }
    const note = complete ? `${got.total} bytes` : `first ${got.bytes.length} of ${got.total} bytes`;
    const kind = sniffed(kindOf(got.type, name), text);
    where.replaceChildren(
      h("p", { class: "muted content-note" }, `${direction} · ${kind} · ${note}`),
      rendered(kind, text, complete),
    );
  }

  function contentRow(e, direction, viewer) {
    const available = e[direction + "ContentAvailable"];
    const claim = e[direction + "ContentClaim"];
    const cells = [h("dt", {}, direction), h("dd", {},
      h("span", { class: "badge " + (available ? "yes" : "no") }, available ? "available" : claim ? "gone" : "none"))];
    if (available) {
      cells[1].append(" ",
        h("button", { class: "view-" + direction, onclick: () => guarded(() => view(e, direction, viewer)) }, "View"),
        " ",
        h("button", {
          class: "download-" + direction,
          onclick: () => guarded(() => Api.download(contentPath(e, direction), `event-${e.eventId}-${direction}`)),
        }, "Download"));
    }
    return cells;
  }

  function replayButton(e, onReplayed) {
    const button = h("button", { class: "replay", title: e.replayExplanation || "replay this event's content" }, "Replay");
    if (!e.replayAvailable) button.setAttribute("disabled", "");
    button.addEventListener("click", () => guarded(async () => {
      const done = (await Api.json("POST", "/nifi-api/provenance-events/replays", { eventId: e.eventId })).provenanceEvent;
      onReplayed(done);
    }));
    return button;
  }

  function fieldsOf(e) {
    return [
      ["event id", e.eventId], ["type", e.eventType], ["time", e.eventTime],
      ["FlowFile", e.flowFileUuid], ["component", `${e.componentName} (${e.componentType})`],
      ["component id", e.componentName !== e.componentId ? e.componentId : ""],
      ["size", `${e.fileSize} (${e.fileSizeBytes} bytes)`], ["transit URI", e.transitUri],
      ["alternate identifier", e.alternateIdentifierUri], ["details", e.details],
      ["relationship", e.relationship],
    ].filter(([, v]) => v !== null && v !== undefined && v !== "");
  }

  // `actions`: extra buttons (expand parents/children); `onReplayed(replayEvent)`.
  function show(box, e, actions, onReplayed) {
    const viewer = h("div", { id: "content-view" });
    const attrs = h("table", { class: "grid attributes" },
      h("thead", {}, h("tr", {}, h("th", {}, "attribute"), h("th", {}, "value"), h("th", {}, "previous"))),
      h("tbody", {}, ...e.attributes.map((a) =>
        h("tr", {}, h("td", { class: "mono" }, a.name), h("td", {}, a.value ?? ""), h("td", { class: "muted" }, a.previousValue ?? "")))),
    );
    const buttons = h("div", { class: "actions" }, ...actions, replayButton(e, onReplayed));
    box.replaceChildren(
      h("h2", { id: "details-title" }, `Event ${e.eventId} · ${e.eventType}`),
      h("dl", {}, ...fieldsOf(e).flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      h("h2", {}, "Content"),
      h("dl", { class: "content" }, ...contentRow(e, "input", viewer), ...contentRow(e, "output", viewer)),
      viewer,
      buttons,
      h("p", { id: "replay-status", class: "muted" }),
      h("h2", {}, "Attributes"),
      attrs,
    );
  }

  return { show, VIEW_BYTES };
})();
