// Small display helpers: sizes, times, DOM building without markup strings.

const UNITS = ["KB", "MB", "GB", "TB"];

/** "0 B", "999 B", "1.5 KB", "12 MB" (powers of 1024). */
export function formatSize(bytes) {
  if (typeof bytes !== "number" || !Number.isFinite(bytes) || bytes < 0) {
    return "";
  }
  if (bytes < 1024) {
    return `${bytes} B`;
  }
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const digits = value < 10 ? 1 : 0;
  return `${value.toFixed(digits)} ${UNITS[unit]}`;
}

// One formatter for every row: creating one per call is slow with 10,000 entries.
const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const timeOnly = new Intl.DateTimeFormat(undefined, { timeStyle: "short" });

/**
 * Intl puts narrow no-break spaces in times ("9:26\u202fAM"); plain spaces read the same
 * and spare the browser a font fallback lookup for that character (slow on first use).
 */
const plainSpaces = (text) => text.replace(/[\u202f\u00a0]/g, " ");

/** A local, readable date and time ("30 Nov 2026, 11:00"), or "" for a bad value. */
export function formatTime(iso) {
  if (!iso) {
    return "";
  }
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) {
    return "";
  }
  return plainSpaces(dateTime.format(date));
}

/** The time of day only, for chat messages of today; the date and time otherwise. */
export function formatChatTime(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) {
    return "";
  }
  const now = new Date();
  if (date.toDateString() === now.toDateString()) {
    return plainSpaces(timeOnly.format(date));
  }
  return plainSpaces(dateTime.format(date));
}

/**
 * `el("button", {className: "x", type: "button"}, "text", child)`: an element with
 * properties (or `data-*`/`aria-*` attributes) and children (strings become text nodes).
 */
export function el(tag, props, ...children) {
  const node = document.createElement(tag);
  if (props) {
    for (const [key, value] of Object.entries(props)) {
      if (value === undefined || value === null || value === false) {
        continue;
      }
      if (key.startsWith("data-") || key.startsWith("aria-") || key === "role") {
        node.setAttribute(key, value === true ? "true" : String(value));
      } else {
        node[key] = value;
      }
    }
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

/** The last component of a `public/…` path. */
export function baseName(path) {
  const i = path.lastIndexOf("/");
  return i < 0 ? path : path.slice(i + 1);
}

/** The folder of a `public/…` path ("public" for a top-level entry). */
export function parentPath(path) {
  const i = path.lastIndexOf("/");
  return i < 0 ? "public" : path.slice(0, i);
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Shows `message` in `container` as a dismissible alert, replacing any earlier one.
 * `dismissLabel` is the accessible name of its close button.
 */
export function showAlertIn(container, message, dismissLabel) {
  const dismiss = el("button", {
    type: "button",
    className: "icon-button",
    "aria-label": dismissLabel,
    title: "Dismiss",
  });
  dismiss.append(el("span", { className: "icon icon-close", "aria-hidden": "true" }));
  const box = el(
    "div",
    { className: "alert-box" },
    el("p", { role: "alert", className: "alert" }, message),
    dismiss,
  );
  dismiss.addEventListener("click", () => box.remove());
  container.replaceChildren(box);
}

/**
 * Lets files from the computer be dropped on `panel`: highlights it (class
 * `drop-active`) while they hover and hands the dropped files to `onFiles`.
 * `accepts()` may refuse for now (the chat while a reply streams).
 */
export function acceptFileDrops(panel, onFiles, accepts = () => true) {
  let dragOverTimer = null;
  const hasFiles = (event) => Array.from(event.dataTransfer.types).includes("Files");
  const unmark = () => {
    clearTimeout(dragOverTimer);
    panel.classList.remove("drop-active");
  };
  panel.addEventListener("dragover", (event) => {
    if (!hasFiles(event) || !accepts()) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "copy";
    panel.classList.add("drop-active");
    clearTimeout(dragOverTimer);
    // dragover repeats while the pointer stays: stop highlighting soon after it leaves.
    dragOverTimer = setTimeout(() => panel.classList.remove("drop-active"), 200);
  });
  panel.addEventListener("dragleave", (event) => {
    if (!panel.contains(event.relatedTarget)) unmark();
  });
  panel.addEventListener("drop", (event) => {
    if (!hasFiles(event)) return;
    event.preventDefault();
    unmark();
    const files = Array.from(event.dataTransfer.files || []);
    if (files.length && accepts()) onFiles(files);
  });
}
