// The "Uploads" list: one XHR per file to POST /v1/media (or, over 8 MiB, a resumable tus
// upload in parts, see tus.js), a progress bar each, and the
// server's own error message next to a file it refused. A file never replaces one of the
// same name unasked: it is sent with overwrite=false, and when the server kept a file
// there, the person is asked (one question at a time) whether to replace it.

import { ApiError, uploadFile } from "./api.js";
import { confirmDialog } from "./dialogs.js";
import { baseName, el, formatSize, formatTime, nameNode, shownName } from "./format.js";
import { TUS_THRESHOLD_BYTES, tusUpload } from "./tus.js";

/** Uploads at once; the rest wait, so the page keeps connections for its other calls. */
const PARALLEL_UPLOADS = 3;

export function createUploads({ list, onUploaded }) {
  let running = 0;
  const waiting = [];
  // The questions asked so far: a new one waits for the last to be answered.
  let asking = Promise.resolve();

  /** Asks whether the upload of `name` replaces the file the server kept; true: replace. */
  function askReplace(name, existing) {
    const asked = asking.then(() =>
      confirmDialog({
        title: ["Replace ", nameNode(name), "?"],
        detail: [
          nameNode(existing.path),
          ` is already there (${formatSize(existing.size)}, changed ${formatTime(existing.modified)}). Replace it with the file you chose, or keep it?`,
        ],
        confirmLabel: "Replace",
        cancelLabel: "Keep",
        action: async () => {},
      }),
    );
    asking = asked.catch(() => false);
    return asked;
  }

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
   * Uploads `file` into `project` (null: main workspace), into the folder `folder`
   * (`public/reports`; null: public/ itself). Resolves to the server's answer
   * (`{path,…}`); rejects with the ApiError, which is also shown next to the file.
   */
  function start(file, project, folder = null) {
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
      const send = (overwrite) => {
        status.textContent = "0 %";
        progress.value = 0;
        let resumed = false;
        const onProgress = (fraction) => {
          progress.value = fraction;
          const percent = `${Math.floor(fraction * 100)} %`;
          status.textContent = fraction >= 1 ? "Finishing…" : resumed ? `${percent} (resumed)` : percent;
        };
        // Large files go in parts that survive a dropped connection and a reload (tus).
        const upload =
          file.size > TUS_THRESHOLD_BYTES
            ? tusUpload(file, project, onProgress, {
                overwrite,
                folder,
                onResumed: () => {
                  resumed = true;
                  item.dataset.resumed = "true";
                },
              })
            : uploadFile(file, project, onProgress, { overwrite, folder });
        abort = upload.abort;
        return upload.promise;
      };
      const sent = send(false).catch((err) => {
        if (err.code !== "exists" || !err.existing) {
          throw err;
        }
        status.textContent = "Already there";
        return askReplace(file.name, err.existing).then((replace) => {
          if (!replace) {
            throw new ApiError(0, "kept", `Kept the ${baseName(err.existing.path)} that was there.`);
          }
          return send(true);
        });
      });
      return sent.finally(release);
    });

    return promise.then(
      (result) => {
        finished = true;
        item.dataset.state = "done";
        progress.value = 1;
        status.textContent = "Uploaded";
        if (result && result.renamedFrom) {
          // C-NAME changed the name: say under which one it was saved.
          item.append(
            el(
              "p",
              { className: "upload-note", role: "status" },
              "Saved as ",
              nameNode(baseName(result.path)),
              " (that name was not allowed as it was).",
            ),
          );
        }
        button.setAttribute("aria-label", `Dismiss ${name}`);
        button.title = "Dismiss";
        if (onUploaded) {
          onUploaded(result, project);
        }
        return result;
      },
      (err) => {
        finished = true;
        item.dataset.state = err.code === "kept" ? "done" : "failed";
        status.textContent = { aborted: "Cancelled", kept: "Kept the old one" }[err.code] ?? "Failed";
        button.setAttribute("aria-label", `Dismiss ${name}`);
        button.title = "Dismiss";
        if (err.code === "aborted" || err.code === "kept") {
          progress.remove();
        } else {
          item.append(el("p", { role: "alert", className: "upload-error" }, nameNode(err.message, "shown-text")));
        }
        throw err;
      },
    );
  }

  /** Uploads several files, each its own request, all at once, into `folder` (null: public/). */
  function startAll(files, project, folder = null) {
    clearFinished();
    return Promise.allSettled(Array.from(files, (file) => start(file, project, folder)));
  }

  return { start, startAll, clearFinished };
}
