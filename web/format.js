// Small display helpers: sizes, times, DOM building without markup strings.

const UNITS = ["KiB", "MiB", "GiB", "TiB"];

/** "0 B", "999 B", "1.5 KiB", "12 MiB": powers of 1024, so named in binary units. */
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

// ---------------------------------------------------------------- names as shown

/**
 * Characters a name shows as a visible marker ("⟨U+202E⟩") instead of themselves:
 * controls (newlines and tabs included), bidirectional marks, embeddings, overrides and
 * isolates, invisible characters (zero-width ones, soft hyphen, word joiner, byte order
 * mark, fillers, tags…), look-alikes of `/` and `\`, and lone surrogates. The same list
 * as the server's (ferry-fs `shown.rs`): keep the two equal.
 */
const HIDDEN_CHARS = String.raw`\p{Cc}\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069\u00AD\u034F\u115F\u1160\u17B4\u17B5\u180E\u200B-\u200D\u2028\u2029\u2060-\u2064\u206A-\u206F\u3164\uFEFF\uFFA0\uFFF9-\uFFFB\u{1D173}-\u{1D17A}\u{E0000}-\u{E007F}\u1680\u2000-\u200A\u202F\u205F\u3000\u2800\u2044\u2215\u2571\u29F8\uFF0F\u0337\u0338\u2216\u2572\u29F5\u29F9\uFE68\uFF3C\u20E5\uD800-\uDFFF`;
const HIDDEN_ONE = new RegExp(`[${HIDDEN_CHARS}]`, "u");
const HIDDEN_RUN = new RegExp(`[${HIDDEN_CHARS}]+`, "gu");

const marker = (c) => `⟨U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`;

/**
 * The one form in which a name or path (or any text from outside) is shown to a person:
 * every hidden or spoofing character spelled as a marker, so "invoice_\u202Efdp.exe"
 * reads "invoice_⟨U+202E⟩fdp.exe". For attributes and plain strings; in the page put
 * names in with `nameNode`, which also isolates them from the text around them.
 */
export function shownName(text) {
  const s = String(text ?? "");
  if (!HIDDEN_ONE.test(s)) return s;
  return s.replace(HIDDEN_RUN, (run) => Array.from(run, marker).join(""));
}

/**
 * Fills `element` with `text` as shown (text nodes, and each marker in a
 * `span.hidden-char`), replacing what it held. Returns `element`.
 */
export function fillName(element, text) {
  const s = String(text ?? "");
  if (!HIDDEN_ONE.test(s)) {
    element.textContent = s;
    return element;
  }
  const parts = [];
  let last = 0;
  for (const m of s.matchAll(HIDDEN_RUN)) {
    if (m.index > last) parts.push(document.createTextNode(s.slice(last, m.index)));
    for (const c of m[0]) parts.push(el("span", { className: "hidden-char" }, marker(c)));
    last = m.index + m[0].length;
  }
  if (last < s.length) parts.push(document.createTextNode(s.slice(last)));
  element.replaceChildren(...parts);
  return element;
}

/**
 * A name or path for the page: a `<bdi>` (its direction isolated, so a right-to-left
 * name cannot reorder the text beside it) holding `shownName(text)`.
 */
export function nameNode(text, className = "shown-name") {
  return fillName(el("bdi", { className }), text);
}

/**
 * `text` (a sentence from outside, such as a server's message) for the page: isolated
 * and shown like a name, with each occurrence of one of `names` isolated on its own.
 */
export function textWithNames(text, names = []) {
  const shown = shownName(text);
  const box = el("bdi", { className: "shown-text" });
  const wanted = names.map(shownName).filter((n) => n && shown.includes(n));
  if (!wanted.length) return fillName(box, shown);
  let rest = shown;
  while (rest) {
    let at = -1;
    let found = "";
    for (const n of wanted) {
      const i = rest.indexOf(n);
      if (i >= 0 && (at < 0 || i < at || (i === at && n.length > found.length))) {
        at = i;
        found = n;
      }
    }
    if (at < 0) {
      box.append(fillName(document.createElement("span"), rest));
      break;
    }
    if (at > 0) box.append(fillName(document.createElement("span"), rest.slice(0, at)));
    box.append(nameNode(found));
    rest = rest.slice(at + found.length);
  }
  return box;
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
    el("p", { role: "alert", className: "alert" }, nameNode(message, "shown-text")),
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
