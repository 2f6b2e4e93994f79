// Find things (M-DAILY): the search box of the Files panel. While a query is typed, the
// results (GET /v1/files/search) replace the tree; Escape or clearing the box brings the
// tree back. A result shows where it lies and, for a match inside a file, the line; its
// row reveals it in the tree, its button downloads it (a folder as a zip).

import { downloadFile, downloadFolder, request } from "./api.js";
import { el, fillName, formatSize, formatTime, parentPath, shownName } from "./format.js";

/** Milliseconds of quiet typing before a search is sent. */
const TYPING_PAUSE_MS = 250;

export function createSearch({ getProject, files }) {
  const form = document.getElementById("files-search");
  const input = document.getElementById("search-input");
  const inContent = document.getElementById("search-content");
  const view = document.getElementById("search-view");
  const status = document.getElementById("search-status");
  const list = document.getElementById("search-results");
  const treeWrap = document.getElementById("tree-wrap");

  let timer = null;
  let running = null;
  /** The last answer's results by path, for the row clicked. */
  let shown = new Map();

  function searching() {
    return input.value.trim() !== "";
  }

  function showTree() {
    view.hidden = true;
    treeWrap.hidden = false;
    list.replaceChildren();
    status.textContent = "";
    shown = new Map();
  }

  function clear() {
    clearTimeout(timer);
    if (running) running.abort();
    running = null;
    input.value = "";
    showTree();
  }

  function schedule(delay = TYPING_PAUSE_MS) {
    clearTimeout(timer);
    if (!searching()) {
      if (running) running.abort();
      showTree();
      return;
    }
    timer = setTimeout(run, delay);
  }

  async function run() {
    if (running) running.abort();
    const controller = new AbortController();
    running = controller;
    const q = input.value;
    const project = getProject();
    view.hidden = false;
    treeWrap.hidden = true;
    view.setAttribute("aria-busy", "true");
    status.textContent = "Searching…";
    try {
      const answer = await request("GET", "/v1/files/search", {
        query: { q, project, content: inContent.checked ? "true" : undefined },
        signal: controller.signal,
      });
      if (controller !== running) return;
      render(answer);
    } catch (err) {
      if (controller !== running || (err && err.name === "AbortError")) return;
      list.replaceChildren();
      status.textContent = err.message || "The search failed.";
    } finally {
      if (controller === running) {
        running = null;
        view.setAttribute("aria-busy", "false");
      }
    }
  }

  function render({ results, truncated }) {
    shown = new Map(results.map((r) => [r.path, r]));
    list.replaceChildren(...results.map(row));
    const where = inContent.checked ? "in names and contents" : "in names";
    if (results.length === 0) {
      status.textContent = `Nothing found ${where}.`;
    } else {
      const count = results.length === 1 ? "1 result" : `${results.length} results`;
      status.textContent = truncated
        ? `${count} ${where}; more matched, narrow the search.`
        : `${count} ${where}.`;
    }
  }

  function row(result) {
    const name = shownName(result.name);
    const folder = parentPath(result.path);
    const main = el(
      "button",
      {
        type: "button",
        className: "result-main",
        title: "Show in the tree",
        "aria-label": `${name}, in ${folder}. Show in the tree`,
        "data-path": result.path,
      },
      fillName(el("span", { className: "name" }), result.name),
      el("span", { className: "result-where" }, folder),
    );
    if (result.line) {
      main.append(
        el(
          "span",
          { className: "result-line" },
          el("span", { className: "result-line-number" }, `${result.line.number}:`),
          " ",
          fillName(el("span", {}), result.line.text),
        ),
      );
    }
    const facts = [];
    if (typeof result.size === "number") facts.push(formatSize(result.size));
    const when = formatTime(result.mtime);
    if (when) facts.push(when);
    const item = el(
      "li",
      { className: `result result-${result.type}` },
      main,
      el("span", { className: "result-facts" }, facts.join(" · ")),
    );
    if (result.type !== "link") {
      const zip = result.type === "dir";
      item.append(
        el("button", {
          type: "button",
          className: `action ${zip ? "action-zip" : "action-download"}`,
          title: zip ? "Download as zip" : "Download",
          "aria-label": `${zip ? "Download as zip" : "Download"} ${name}`,
          "data-download": result.path,
        }),
      );
    }
    return item;
  }

  list.addEventListener("click", (event) => {
    const download = event.target.closest("button[data-download]");
    if (download) {
      const result = shown.get(download.dataset.download);
      if (!result) return;
      const save = result.type === "dir" ? downloadFolder : downloadFile;
      save(result.path, getProject()).catch((err) => {
        status.textContent = err.message || "The download failed.";
      });
      return;
    }
    const main = event.target.closest("button[data-path]");
    if (main) {
      const path = main.dataset.path;
      clear();
      files.reveal(path);
    }
  });

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    schedule(0);
  });
  input.addEventListener("input", () => schedule());
  inContent.addEventListener("change", () => {
    if (searching()) schedule(0);
  });
  form.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && (searching() || !view.hidden)) {
      event.preventDefault();
      clear();
      input.focus();
    }
  });
  view.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      clear();
      input.focus();
    }
  });

  return {
    clear,
    /** A new project: its own results, or the tree. */
    projectChanged() {
      if (searching()) schedule(0);
      else showTree();
    },
  };
}
