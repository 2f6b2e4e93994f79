// The gateway's HTTP API as the page uses it: every call carries the bearer token
// (never in a URL), errors become ApiError with the server's code and message, and a
// 401 from any call hands over to the sign-in form.

const TOKEN_KEY = "ferry.token";

let token = null;
let unauthorizedHandler = () => {};

/** An error answered by the gateway (`{"error":{"code","message"}}`) or the network. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }
}

/**
 * The token in `text`: a token as it is, or an address or fragment that carries one
 * (`http://…/#token=…`, `#token=…`, `token=…`), as people paste what `ferry serve`
 * printed. Null when an address carries none.
 */
export function tokenFrom(text) {
  const value = String(text ?? "").trim();
  const at = value.indexOf("#");
  const fragment = at >= 0 ? value.slice(at + 1) : value.startsWith("token=") ? value : null;
  if (fragment !== null) {
    const found = new URLSearchParams(fragment).get("token");
    return found && found.trim() ? found.trim() : null;
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) return null;
  return value || null;
}

/**
 * Takes the token out of the address's `#token=…` (dropping it from the address, so it
 * is neither bookmarked nor shared); null when the address carries none.
 */
export function takeTokenFromAddress() {
  const hash = window.location.hash;
  if (hash.length <= 1) return null;
  const params = new URLSearchParams(hash.slice(1));
  const fromHash = params.get("token");
  if (fromHash === null) return null;
  params.delete("token");
  const rest = params.toString();
  const url = window.location.pathname + window.location.search + (rest ? `#${rest}` : "");
  window.history.replaceState(window.history.state, "", url);
  return fromHash.trim() || null;
}

/** Whether the token is kept on this device (local storage), not only in this tab. */
export function isRemembered() {
  try {
    return localStorage.getItem(TOKEN_KEY) !== null;
  } catch {
    return false;
  }
}

/**
 * Reads the token from `#token=…` (then drops the fragment), else from this tab's
 * session storage, else from this device's local storage ("Keep me signed in").
 */
export function loadToken() {
  const fromHash = takeTokenFromAddress();
  if (fromHash) {
    setToken(fromHash, { remember: isRemembered() });
  }
  token = sessionStorage.getItem(TOKEN_KEY) || readLocal();
  return token;
}

function readLocal() {
  try {
    return localStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

/**
 * Sets the token for the calls to come: kept in this tab's session storage, and with
 * `remember` in this device's local storage too, so a new tab is signed in. Without
 * `remember` a token kept on the device before is dropped; `null` drops both.
 */
export function setToken(value, { remember = false } = {}) {
  token = value;
  try {
    if (value && remember) localStorage.setItem(TOKEN_KEY, value);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    // Storage refused (a private window's quota): this tab still works.
  }
  if (value) {
    sessionStorage.setItem(TOKEN_KEY, value);
  } else {
    sessionStorage.removeItem(TOKEN_KEY);
  }
}

/** The token this tab holds now. */
export function currentToken() {
  return token;
}

/** The Authorization header value for requests the page makes itself; null signed out. */
export function authHeader() {
  return token ? `Bearer ${token}` : null;
}

export function hasToken() {
  return Boolean(token);
}

/** Called (once per 401) with the ApiError; the app shows the sign-in form. */
export function onUnauthorized(handler) {
  unauthorizedHandler = handler;
}

function unauthorized(err) {
  try {
    unauthorizedHandler(err);
  } catch (e) {
    console.error(e);
  }
}

function authHeaders(extra) {
  const headers = new Headers(extra);
  if (token) {
    headers.set("Authorization", `Bearer ${token}`);
  }
  return headers;
}

/** `path?query` with null/undefined/"" values left out. */
export function apiUrl(path, query) {
  if (!query) {
    return path;
  }
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== null && value !== undefined && value !== "") {
      params.set(key, value);
    }
  }
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

/** The ApiError a failed response carries. */
async function errorFrom(response) {
  let code = `http_${response.status}`;
  let message = `The server answered ${response.status} ${response.statusText}`.trim() + ".";
  try {
    const text = await response.text();
    const body = JSON.parse(text);
    if (body && body.error) {
      code = String(body.error.code ?? code);
      message = String(body.error.message ?? message);
    }
  } catch {
    // Not the JSON error shape: keep the generic message.
  }
  return new ApiError(response.status, code, message);
}

/**
 * One API call. `json` is sent as the body; `raw` returns the Response (for streams and
 * downloads) instead of its parsed JSON. Throws ApiError on failure.
 */
export async function request(method, path, { query, json, signal, raw = false, headers } = {}) {
  const init = { method, headers: authHeaders(headers), signal, cache: "no-store" };
  if (json !== undefined) {
    init.headers.set("Content-Type", "application/json");
    init.body = JSON.stringify(json);
  }
  let response;
  try {
    response = await fetch(apiUrl(path, query), init);
  } catch (e) {
    if (e && e.name === "AbortError") {
      throw e;
    }
    throw new ApiError(0, "network", "Could not reach the server. Check the connection and try again.");
  }
  if (!response.ok) {
    const err = await errorFrom(response);
    if (response.status === 401) {
      unauthorized(err);
    }
    throw err;
  }
  if (raw) {
    return response;
  }
  if (response.status === 204) {
    return null;
  }
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

/**
 * Uploads one file to `POST /v1/media` with XHR (for upload progress). `onProgress`
 * receives a fraction 0..1. Returns `{promise, abort}`; the promise resolves to the
 * server's JSON (`{path,size,sha256,project}`) or rejects with an ApiError.
 */
export function uploadFile(file, project, onProgress, { overwrite = true, folder = null } = {}) {
  const form = new FormData();
  // The project and folder first, so the server knows where the file goes before its bytes.
  if (project) {
    form.append("project", project);
  }
  // Always named, `public` for public/ itself: with the project and the folder known
  // before the file, the server refuses a name it will not place before the bytes come.
  form.append("folder", folder || "public");
  form.append("file", file, file.name);
  const url = overwrite ? "/v1/media" : "/v1/media?overwrite=false";
  return postForm(url, form, onProgress);
}

/**
 * POSTs `form` to `url` with XHR, reporting upload progress to `onProgress` (0..1).
 * `withToken: false` sends no Authorization header (a signed link is its own authority).
 * Returns `{promise, abort}` as `uploadFile` does.
 */
export function postForm(url, form, onProgress, { withToken = true } = {}) {
  const xhr = new XMLHttpRequest();
  const promise = new Promise((resolve, reject) => {
    xhr.open("POST", url);
    if (token && withToken) {
      xhr.setRequestHeader("Authorization", `Bearer ${token}`);
    }
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable && e.total > 0 && onProgress) {
        onProgress(e.loaded / e.total);
      }
    };
    xhr.onload = () => {
      let body = null;
      try {
        body = xhr.responseText ? JSON.parse(xhr.responseText) : null;
      } catch {
        body = null;
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        resolve(body);
        return;
      }
      const err = new ApiError(
        xhr.status,
        body?.error?.code ?? `http_${xhr.status}`,
        body?.error?.message ?? `The server answered ${xhr.status}.`,
      );
      // A `409 exists` names the file that was kept.
      err.existing = body?.error?.existing ?? null;
      if (xhr.status === 401) {
        unauthorized(err);
      }
      reject(err);
    };
    xhr.onerror = () => {
      reject(
        new ApiError(
          0,
          "network",
          "The upload was cut off before the server answered (the connection closed; the file may be over the size limit).",
        ),
      );
    };
    xhr.onabort = () => reject(new ApiError(0, "aborted", "Upload cancelled."));
    xhr.send(form);
  });
  return { promise, abort: () => xhr.abort() };
}

/**
 * A WebSocket to `path` on this page's own origin (`ws:`, or `wss:` under https). A
 * browser cannot set headers on a WebSocket, so the token travels as a second
 * subprotocol beside `protocol`, the one the server selects; it never goes in the URL.
 */
export function openSocket(path, protocol) {
  const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
  const protocols = token ? [protocol, `ferry.token.${token}`] : [protocol];
  const socket = new WebSocket(`${scheme}//${window.location.host}${path}`, protocols);
  socket.binaryType = "arraybuffer";
  return socket;
}

/** The file name a `Content-Disposition` header gives (`filename*` first), or null. */
export function filenameFromDisposition(header) {
  if (!header) {
    return null;
  }
  const star = /filename\*\s*=\s*([^;]+)/i.exec(header);
  if (star) {
    let value = star[1].trim().replace(/^"(.*)"$/, "$1");
    const quote = value.indexOf("''");
    if (quote >= 0) {
      value = value.slice(quote + 2);
    }
    try {
      return decodeURIComponent(value);
    } catch {
      // Fall through to the plain parameter.
    }
  }
  const plain = /filename\s*=\s*("((?:[^"\\]|\\.)*)"|[^;]+)/i.exec(header);
  if (plain) {
    return (plain[2] !== undefined ? plain[2].replace(/\\(.)/g, "$1") : plain[1]).trim();
  }
  return null;
}

/**
 * Downloads a file of `public/` with the auth header: fetch → Blob → object URL →
 * a temporary `<a download>`. The token never appears in a URL.
 */
export function downloadFile(path, project) {
  return saveDownload("/v1/files/content", path, project, path.split("/").pop() || "download");
}

/** Downloads a folder of `public/` as a zip (`GET /v1/files/archive`), like a file. */
export function downloadFolder(path, project) {
  return saveDownload("/v1/files/archive", path, project, `${path.split("/").pop() || "public"}.zip`);
}

async function saveDownload(route, path, project, fallback) {
  const response = await request("GET", route, { query: { path, project }, raw: true });
  // A zip aborted midway (a file grew past the cap) rejects here: nothing is saved.
  const blob = await response.blob();
  const name = filenameFromDisposition(response.headers.get("Content-Disposition")) || fallback;
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/**
 * Server-sent events from a fetch Response body: yields `{event, data}` per event.
 * `event` defaults to "message"; `data` lines are joined with "\n"; `:` comments and
 * unknown fields are skipped; a blank line ends an event.
 */
export async function* readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let eventName = "";
  let data = [];
  let hasData = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        break;
      }
      buffer += value;
      let start = 0;
      const lineEnd = /\r\n|\r|\n/g;
      for (;;) {
        lineEnd.lastIndex = start;
        const match = lineEnd.exec(buffer);
        if (!match) {
          break;
        }
        const end = match.index;
        // A lone "\r" at the end may be the first half of "\r\n": wait for more.
        if (buffer[end] === "\r" && end + 1 === buffer.length) {
          break;
        }
        const line = buffer.slice(start, end);
        start = end + (buffer[end] === "\r" && buffer[end + 1] === "\n" ? 2 : 1);
        if (line === "") {
          if (hasData || eventName) {
            yield { event: eventName || "message", data: data.join("\n") };
          }
          eventName = "";
          data = [];
          hasData = false;
          continue;
        }
        if (line.startsWith(":")) {
          continue;
        }
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) {
          val = val.slice(1);
        }
        if (field === "event") {
          eventName = val;
        } else if (field === "data") {
          data.push(val);
          hasData = true;
        }
      }
      buffer = buffer.slice(start);
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

/** JSON.parse that answers null instead of throwing. */
export function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
