// The API client of the page: every call carries the bearer token (kept in sessionStorage,
// never in a URL the server sees). Errors surface as one line from the API's "detail".
"use strict";

const Api = (() => {
  const KEY = "flowledger.token";

  function token() {
    return sessionStorage.getItem(KEY) || "";
  }

  function setToken(value) {
    sessionStorage.setItem(KEY, value.trim());
  }

  // A token handed in the URL fragment (never sent to the server) is taken and removed.
  function takeTokenFromFragment() {
    const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
    if (m) {
      setToken(decodeURIComponent(m[1]));
      history.replaceState(null, "", location.pathname + location.search);
    }
  }

  async function call(method, path, body, extra) {
    const headers = { Authorization: "Bearer " + token(), ...(extra || {}) };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const resp = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!resp.ok) {
      let detail = resp.status + " " + resp.statusText;
      try {
        detail = (await resp.json()).detail || detail;
      } catch (e) { /* not JSON */ }
      throw new Error(detail);
    }
    return resp;
  }

  async function json(method, path, body) {
    return (await call(method, path, body)).json();
  }

  // Downloads need the header too: fetch the bytes, then save them from a blob URL.
  async function download(path, fallbackName) {
    const resp = await call("GET", path);
    const cd = resp.headers.get("Content-Disposition") || "";
    const m = /filename="([^"]+)"/.exec(cd);
    const url = URL.createObjectURL(await resp.blob());
    const a = document.createElement("a");
    a.href = url;
    a.download = m ? m[1] : fallbackName;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  // The first `maxBytes` of a content (one ranged GET): its bytes, media type and full size.
  async function peek(path, maxBytes) {
    const resp = await call("GET", path, undefined, { Range: `bytes=0-${maxBytes - 1}` });
    const range = /\/(\d+)$/.exec(resp.headers.get("Content-Range") || "");
    const bytes = new Uint8Array(await resp.arrayBuffer());
    return {
      bytes: bytes.slice(0, maxBytes),
      type: resp.headers.get("Content-Type") || "",
      total: range ? Number(range[1]) : bytes.length,
    };
  }

  return { token, setToken, takeTokenFromFragment, json, download, peek };
})();
