// The "Uploads" list: one XHR per file to POST /v1/media, a progress bar each, and the
// server's own error message next to a file it refused.

import { ApiError, uploadFile } from "./api.js";
import { el, nameNode, shownName } from "./format.js";

/** Uploads at once; the rest wait, so the page keeps connections for its other calls. */
const PARALLEL_UPLOADS = 3;

export function createUploads({ list, onUploaded }) {
  let running = 0;
  const waiting = [];

  function acquire() {
    if (running < PARALLEL_UPLOADS) {
      running += 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => waiting.push(resolve));
  }

  function release() {
    const next = waiting.shift();
    if (next) {
      next();
    } else {
      running -= 1;
    }
  }

  /** Finished successful items are cleared when the next batch starts. */
  function clearFinished() {
    for (const item of list.querySelectorAll(".upload[data-state=done]")) {
      item.remove();
    }
  }

  /**
   * Uploads `file` into `project` (null: main workspace). Resolves to the server's
   * answer (`{path,…}`); rejects with the ApiError, which is also shown next to the file.
   */
  function start(file, project) {
    const name = shownName(file.name);
    const status = el("span", { className: "upload-status" }, "Waiting…");
    const progress = el("progress", {
      max: 1,
      value: 0,
      "aria-label": `Upload progress of ${name}`,
    });
    const button = el("button", {
      type: "button",
      className: "icon-button",
      "aria-label": `Stop ${name}`,
      title: "Stop this upload",
    });
    button.append(el("span", { className: "icon icon-close", "aria-hidden": "true" }));
    const item = el(
      "li",
      { className: "upload", "data-state": "uploading" },
      el(
        "div",
        { className: "upload-line" },
        el("span", { className: "upload-name", title: name }, nameNode(file.name)),
        status,
        button,
      ),
      progress,
    );
    list.append(item);

    let finished = false;
    let cancelled = false;
    let abort = () => {
      cancelled = true;
    };
    button.addEventListener("click", () => (finished ? item.remove() : abort()));

    const promise = acquire().then(() => {
      if (cancelled) {
        release();
        return Promise.reject(new ApiError(0, "aborted", "Upload cancelled."));
      }
      status.textContent = "0 %";
      const upload = uploadFile(file, project, (fraction) => {
        progress.value = fraction;
        status.textContent = fraction >= 1 ? "Finishing…" : `${Math.floor(fraction * 100)} %`;
      });
      abort = upload.abort;
      return upload.promise.finally(release);
    });

    return promise.then(
      (result) => {
        finished = true;
        item.dataset.state = "done";
        progress.value = 1;
        status.textContent = "Uploaded";
        button.setAttribute("aria-label", `Dismiss ${name}`);
        button.title = "Dismiss";
        if (onUploaded) {
          onUploaded(result, project);
        }
        return result;
      },
      (err) => {
        finished = true;
        item.dataset.state = "failed";
        status.textContent = err.code === "aborted" ? "Cancelled" : "Failed";
        button.setAttribute("aria-label", `Dismiss ${name}`);
        button.title = "Dismiss";
        if (err.code === "aborted") {
          progress.remove();
        } else {
          item.append(el("p", { role: "alert", className: "upload-error" }, nameNode(err.message, "shown-text")));
        }
        throw err;
      },
    );
  }

  /** Uploads several files, each its own request, all at once. */
  function startAll(files, project) {
    clearFinished();
    return Promise.allSettled(Array.from(files, (file) => start(file, project)));
  }

  return { start, startAll, clearFinished };
}
