// Resumable uploads by tus 1.0 against /v1/uploads, for files too large to risk on one
// request. The file goes in parts; a part cut off (the connection dropped, the page went
// offline) is followed by a HEAD that says where the server stands, and the upload goes
// on from there. The upload's URL is kept in localStorage under the file's fingerprint
// (name, size, time, where it goes), so the same file chosen again after a reload
// resumes where it was instead of starting over.

import { ApiError, authHeader } from "./api.js";

/** Files larger than this go by tus; smaller ones in one POST /v1/media. */
export const TUS_THRESHOLD_BYTES = 8 * 1024 * 1024;
/** Bytes sent per PATCH. */
const PART_BYTES = 8 * 1024 * 1024;
/** Waits before the next try after a failed part, in milliseconds; then it gives up. */
const RETRY_DELAYS_MS = [500, 1000, 2000, 4000, 8000, 15000, 30000];
const STORAGE_PREFIX = "ferry.tus:";
const TUS_VERSION = "1.0.0";

/** The key an upload of `file` to `project`/`folder` is remembered under. */
function fingerprint(file, project, folder) {
  return `${STORAGE_PREFIX}${JSON.stringify([file.name, file.size, file.lastModified, project ?? "", folder ?? ""])}`;
}

function remembered(key) {
  try {
    const saved = JSON.parse(localStorage.getItem(key) ?? "null");
    return typeof saved?.url === "string" && saved.url.startsWith("/v1/uploads/") ? saved.url : null;
  } catch {
    return null;
  }
}

function remember(key, url) {
  try {
    localStorage.setItem(key, JSON.stringify({ url, at: Date.now() }));
  } catch {
    // Storage full or refused: the upload still works, it just cannot resume after a reload.
  }
}

function forget(key) {
  try {
    localStorage.removeItem(key);
  } catch {
    // Nothing to do.
  }
}

function base64(text) {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

/**
 * One request with XHR (for upload progress): resolves with the XHR whatever its status;
 * rejects with an ApiError `network` when no answer came, or `aborted`.
 */
function send(method, url, headers, body, { onProgress, onXhr } = {}) {
  const xhr = new XMLHttpRequest();
  onXhr?.(xhr);
  return new Promise((resolve, reject) => {
    xhr.open(method, url);
    const auth = authHeader();
    if (auth) xhr.setRequestHeader("Authorization", auth);
    xhr.setRequestHeader("Tus-Resumable", TUS_VERSION);
    for (const [k, v] of Object.entries(headers)) xhr.setRequestHeader(k, v);
    if (onProgress) {
      xhr.upload.onprogress = (e) => onProgress(e.loaded);
    }
    xhr.onload = () => resolve(xhr);
    xhr.onerror = () => reject(new ApiError(0, "network", "The connection dropped."));
    xhr.onabort = () => reject(new ApiError(0, "aborted", "Upload cancelled."));
    xhr.send(body ?? null);
  });
}

/** The ApiError of an answer that is not a success. */
function errorOf(xhr) {
  let body = null;
  try {
    body = xhr.responseText ? JSON.parse(xhr.responseText) : null;
  } catch {
    body = null;
  }
  const err = new ApiError(
    xhr.status,
    body?.error?.code ?? `http_${xhr.status}`,
    body?.error?.message ?? `The server answered ${xhr.status}.`,
  );
  err.existing = body?.error?.existing ?? null;
  return err;
}

/** The placed file, from the headers of the last PATCH (or of a HEAD once complete). */
function completedFrom(xhr, project) {
  const path = xhr.getResponseHeader("Ferry-Path");
  if (!path) return null;
  const renamed = xhr.getResponseHeader("Ferry-Renamed-From");
  return {
    path: decodeURIComponent(path),
    size: Number(xhr.getResponseHeader("Ferry-Size")),
    sha256: xhr.getResponseHeader("Ferry-Sha256"),
    project: project ?? null,
    ...(renamed ? { renamedFrom: decodeURIComponent(renamed) } : {}),
  };
}

/** Resolves once the page is online again (at once when it is). */
function online() {
  if (navigator.onLine) return Promise.resolve();
  return new Promise((resolve) => window.addEventListener("online", () => resolve(), { once: true }));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Whether a failure is worth another try after asking the server where it stands. */
function transient(err) {
  return err.status === 0 || err.status === 423 || err.status === 409 || err.status >= 500;
}

/**
 * Uploads `file` into `project` (null: the main workspace) by tus, resuming an upload of
 * the same file remembered from before. `onProgress(fraction)`; `onResumed(offset)` when
 * an upload goes on from a byte other than 0. Returns `{promise, abort}` as uploadFile
 * does; the promise resolves to `{path,size,sha256,project,renamedFrom?}`.
 */
export function tusUpload(file, project, onProgress, { overwrite = true, folder = null, onResumed } = {}) {
  const key = fingerprint(file, project, folder);
  let current = null;
  let stopped = false;
  let uploadUrl = null;

  const progress = (sent) => onProgress?.(file.size > 0 ? Math.min(1, sent / file.size) : 1);

  async function create() {
    const metadata = [["filename", file.name], ["overwrite", overwrite ? "true" : "false"]];
    if (project) metadata.push(["project", project]);
    if (folder) metadata.push(["folder", folder]);
    const xhr = await send("POST", "/v1/uploads", {
      "Upload-Length": String(file.size),
      "Upload-Metadata": metadata.map(([k, v]) => `${k} ${base64(v)}`).join(","),
    }, null, { onXhr: (x) => (current = x) });
    if (xhr.status !== 201) throw errorOf(xhr);
    const url = new URL(xhr.getResponseHeader("Location"), window.location.href).pathname;
    remember(key, url);
    return { url, done: completedFrom(xhr, project) };
  }

  /** Where the remembered upload stands; null when the server no longer has it. */
  async function where(url) {
    const xhr = await send("HEAD", url, {}, null, { onXhr: (x) => (current = x) });
    if (xhr.status === 404 || xhr.status === 410) return null;
    if (xhr.status !== 200) throw errorOf(xhr);
    if (Number(xhr.getResponseHeader("Upload-Length")) !== file.size) return null;
    return { offset: Number(xhr.getResponseHeader("Upload-Offset")), done: completedFrom(xhr, project) };
  }

  async function run() {
    let offset = 0;
    uploadUrl = remembered(key);
    if (uploadUrl) {
      const stands = await where(uploadUrl);
      if (stands?.done) {
        forget(key);
        progress(file.size);
        return stands.done;
      }
      if (stands) {
        offset = stands.offset;
        if (offset > 0) onResumed?.(offset);
      } else {
        forget(key);
        uploadUrl = null;
      }
    }
    if (!uploadUrl) {
      const made = await create();
      uploadUrl = made.url;
      if (made.done) {
        forget(key);
        return made.done;
      }
    }
    progress(offset);
    let tries = 0;
    for (;;) {
      if (stopped) throw new ApiError(0, "aborted", "Upload cancelled.");
      const end = Math.min(file.size, offset + PART_BYTES);
      try {
        const xhr = await send(
          "PATCH",
          uploadUrl,
          { "Upload-Offset": String(offset), "Content-Type": "application/offset+octet-stream" },
          file.slice(offset, end),
          { onProgress: (loaded) => progress(offset + loaded), onXhr: (x) => (current = x) },
        );
        if (xhr.status !== 204) throw errorOf(xhr);
        offset = Number(xhr.getResponseHeader("Upload-Offset"));
        tries = 0;
        progress(offset);
        const done = completedFrom(xhr, project);
        if (done) {
          forget(key);
          return done;
        }
      } catch (err) {
        if (err.code === "aborted" || !transient(err) || tries >= RETRY_DELAYS_MS.length) {
          if (err.status === 404 || err.status === 410 || err.code === "exists") forget(key);
          throw err;
        }
        await sleep(RETRY_DELAYS_MS[tries]);
        tries += 1;
        await online();
        // Ask where the server stands, and go on from there.
        const stands = await where(uploadUrl).catch((e) => (transient(e) ? { offset } : Promise.reject(e)));
        if (!stands) {
          forget(key);
          throw new ApiError(410, "upload_expired", "The server no longer has this upload; send the file again.");
        }
        if (stands.done) {
          forget(key);
          return stands.done;
        }
        if (stands.offset > 0) onResumed?.(stands.offset);
        offset = stands.offset;
      }
    }
  }

  const promise = run();
  return {
    promise,
    abort: () => {
      stopped = true;
      current?.abort();
      // A cancelled upload is ended on the server too, and not resumed later.
      if (uploadUrl) {
        send("DELETE", uploadUrl, {}, null).catch(() => {});
      }
      forget(key);
    },
  };
}
