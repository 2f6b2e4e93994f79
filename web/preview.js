// The preview panel: what a file holds, before downloading it (GET /v1/files/preview).
//
// The JSON preview comes first; its texts, rows and member names are put in with
// textContent only, never as HTML. A picture (an image scaled, a PDF's first page) is a
// second request (`format=image`), fetched with the bearer header and shown through an
// object URL, revoked when the panel changes or closes. Beside the tree on wide screens,
// a full-width sheet on narrow ones; Escape closes it and focus goes back to the row.

import { ApiError, downloadFile, request } from "./api.js";
import { el, formatSize, nameNode, shownName, textWithNames } from "./format.js";

/** What a `kind` is called in the panel's summary line. */
const KIND_LABELS = {
  image: "Image",
  pdf: "PDF document",
  text: "Text",
  table: "Table",
  archive: "Archive",
  empty: "Empty file",
  file: "File",
};

export function createPreview({ panels, onClosed }) {
  const panel = document.getElementById("preview");
  const title = document.getElementById("preview-title");
  const fileName = document.getElementById("preview-name");
  const meta = document.getElementById("preview-meta");
  const body = document.getElementById("preview-body");
  const status = document.getElementById("preview-status");
  const downloadButton = document.getElementById("preview-download");
  const closeButtons = panel.querySelectorAll("[data-preview-close]");

  /** The file shown: `{path, project, name}`, or null. */
  let shown = null;
  let aborter = null;
  let objectUrl = null;

  function releasePicture() {
    if (objectUrl) {
      URL.revokeObjectURL(objectUrl);
      objectUrl = null;
    }
  }

  function say(message) {
    status.textContent = message;
  }

  /** Opens the panel on the file `node` (a listing entry) of `project`. */
  async function open(node, project) {
    if (aborter) aborter.abort();
    aborter = new AbortController();
    const { signal } = aborter;
    releasePicture();
    shown = { path: node.path, project, name: node.name };
    fileName.replaceChildren(nameNode(node.name));
    panel.setAttribute("aria-label", `Preview of ${shownName(node.name)}`);
    meta.replaceChildren(typeof node.size === "number" ? formatSize(node.size) : "");
    body.replaceChildren(el("p", { className: "note preview-loading" }, "Loading the preview…"));
    panel.setAttribute("aria-busy", "true");
    panel.hidden = false;
    panels.classList.add("previewing");
    title.focus();
    try {
      const preview = await request("GET", "/v1/files/preview", {
        query: { path: node.path, project },
        signal,
      });
      if (signal.aborted) return;
      showPreview(preview, signal);
      say(`Preview of ${shownName(node.name)} shown.`);
    } catch (err) {
      if (signal.aborted || (err && err.name === "AbortError")) return;
      body.replaceChildren(problem(err));
      say(`No preview of ${shownName(node.name)}.`);
    } finally {
      if (!signal.aborted) panel.removeAttribute("aria-busy");
    }
  }

  function problem(err) {
    const message = err instanceof ApiError ? err.message : "The preview could not be made.";
    return el("p", { className: "alert preview-error", role: "alert" }, textWithNames(message));
  }

  function showPreview(preview, signal) {
    const parts = [KIND_LABELS[preview.kind] ?? "File"];
    // The format's name where it says more than the kind (a PNG, an .xlsx, a tar); the
    // media type for texts, which the sniffer names only as "Plain Text".
    if (preview.kind === "text" || preview.kind === "table") parts.push(preview.mediaType.split(";")[0]);
    else if (preview.kind !== "empty" && preview.kind !== "pdf" && preview.format) parts.push(preview.format);
    parts.push(formatSize(preview.size));
    if (preview.kind === "image") parts.push(`${preview.width} × ${preview.height} px`);
    if (preview.kind === "pdf" && typeof preview.pages === "number") {
      parts.push(preview.pages === 1 ? "1 page" : `${preview.pages} pages`);
    }
    if (preview.kind === "archive") {
      parts.push(preview.memberCount === 1 ? "1 item" : `${preview.memberCount} items`);
    }
    meta.replaceChildren(parts.filter(Boolean).join(" · "));

    const content = [];
    if (preview.note) {
      content.push(el("p", { className: "note preview-note" }, textWithNames(preview.note)));
    }
    switch (preview.kind) {
      case "image":
      case "pdf":
        if (preview.hasImage) content.push(picture(preview, signal));
        if (preview.kind === "pdf") content.push(...pdfText(preview));
        break;
      case "text":
        content.push(textBlock(preview.text));
        if (preview.truncated) content.push(cutNote("Only the beginning of the file is shown."));
        break;
      case "table":
        content.push(table(preview.rows));
        if (preview.truncated) content.push(cutNote("Only the first rows and columns are shown."));
        break;
      case "archive":
        content.push(members(preview.members));
        if (preview.truncated) {
          content.push(cutNote(`Only the first ${preview.members.length} of ${preview.memberCount} items are listed.`));
        }
        break;
      case "empty":
        content.push(el("p", { className: "note" }, "This file is empty."));
        break;
      default:
        if (!preview.note) {
          content.push(el("p", { className: "note" }, "There is no preview for this kind of file. Download it to open it."));
        }
    }
    if (preview.sha256) {
      content.push(
        el(
          "p",
          { className: "preview-hash" },
          el("span", { className: "muted" }, "SHA-256 "),
          el("code", {}, preview.sha256),
        ),
      );
    }
    body.replaceChildren(...content);
  }

  function cutNote(text) {
    return el("p", { className: "note preview-cut" }, text);
  }

  function textBlock(text) {
    const pre = el("pre", { className: "preview-text", tabIndex: 0 });
    pre.setAttribute("aria-label", "File text");
    pre.textContent = text;
    return pre;
  }

  function pdfText(preview) {
    if (preview.encrypted) return [];
    if (!preview.text) {
      return [el("p", { className: "note" }, "The first page has no text that can be extracted (it may be a scan).")];
    }
    const out = [el("h3", { className: "preview-subtitle" }, "Text of the first page"), textBlock(preview.text)];
    if (preview.textTruncated) out.push(cutNote("Only the beginning of the page's text is shown."));
    return out;
  }

  function table(rows) {
    const wrap = el("div", { className: "preview-table-wrap", tabIndex: 0 });
    wrap.setAttribute("aria-label", "Table rows");
    const tableEl = el("table", { className: "preview-table" });
    if (rows.length > 0) {
      const head = el("thead");
      const tr = el("tr");
      for (const cell of rows[0]) tr.append(el("th", { scope: "col" }, cell));
      head.append(tr);
      tableEl.append(head);
    }
    const bodyEl = el("tbody");
    for (const row of rows.slice(1)) {
      const tr = el("tr");
      for (const cell of row) tr.append(el("td", {}, cell));
      bodyEl.append(tr);
    }
    tableEl.append(bodyEl);
    wrap.append(tableEl);
    return wrap;
  }

  function members(list) {
    const ul = el("ul", { className: "preview-members" });
    ul.setAttribute("aria-label", "Items in the archive");
    for (const member of list) {
      const li = el(
        "li",
        { className: member.dir ? "member member-dir" : "member" },
        el("span", { className: `icon ${member.dir ? "icon-folder" : "icon-file"}`, "aria-hidden": "true" }),
        nameNode(member.name),
      );
      if (!member.dir) li.append(el("span", { className: "member-size" }, formatSize(member.size)));
      if (member.encrypted) li.append(el("span", { className: "badge" }, "encrypted"));
      ul.append(li);
    }
    return ul;
  }

  /** A figure whose picture arrives by a second request. */
  function picture(preview, signal) {
    const figure = el("figure", { className: "preview-figure" });
    const waiting = el("p", { className: "note preview-loading" }, preview.kind === "pdf" ? "Drawing the first page…" : "Loading the picture…");
    figure.append(waiting);
    loadPicture(preview, signal, figure, waiting);
    return figure;
  }

  async function loadPicture(preview, signal, figure, waiting) {
    try {
      const response = await request("GET", "/v1/files/preview", {
        query: { path: preview.path, project: preview.project, format: "image" },
        signal,
        raw: true,
      });
      const blob = await response.blob();
      if (signal.aborted) return;
      // Only a PNG is ever shown, whatever a response might claim.
      const png = new Blob([blob], { type: "image/png" });
      releasePicture();
      objectUrl = URL.createObjectURL(png);
      const img = el("img", {
        className: "preview-image",
        src: objectUrl,
        alt:
          preview.kind === "pdf"
            ? `First page of ${shownName(preview.name)}`
            : `Picture in ${shownName(preview.name)}`,
        decoding: "async",
      });
      figure.replaceChildren(img);
    } catch (err) {
      if (signal.aborted || (err && err.name === "AbortError")) return;
      waiting.replaceWith(problem(err));
    }
  }

  function close() {
    if (panel.hidden) return;
    if (aborter) aborter.abort();
    aborter = null;
    releasePicture();
    const closing = shown;
    shown = null;
    panel.hidden = true;
    panels.classList.remove("previewing");
    body.replaceChildren();
    say("Preview closed.");
    if (closing && onClosed) onClosed(closing.path);
  }

  downloadButton.addEventListener("click", () => {
    if (!shown) return;
    downloadFile(shown.path, shown.project).catch((err) => {
      body.prepend(problem(err));
    });
  });
  for (const button of closeButtons) button.addEventListener("click", close);
  panel.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !event.defaultPrevented) {
      event.preventDefault();
      close();
    }
  });

  return {
    open,
    close,
    get shownPath() {
      return shown ? shown.path : null;
    },
  };
}
