// One node terminal (spec N-TERM): xterm.js in a pane, its WebSocket to
// `/v1/nodes/{id}/terminal`, and files dropped onto it, staged on the node, whose quoted
// paths are pasted at the prompt. Nothing here ever sends Enter on the person's behalf.

import { ApiError, openSocket, postForm, request } from "./api.js";
import { acceptFileDrops, el, nameNode } from "./format.js";

const PROTOCOL = "ferry.terminal.v1";
/** Most bytes of one dropped file (the gateway decides; the page spares a useless send). */
/**
 * Opens a link a program printed in a terminal, if it is http(s): anything else
 * (`javascript:`, `file:`, `data:`) is ignored.
 */
function openPrintedLink(_event, uri) {
  let url;
  try {
    url = new URL(uri);
  } catch {
    return;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return;
  window.open(url.href, "_blank", "noopener,noreferrer");
}

export const UPLOAD_MAX_BYTES = 16 * 1024 * 1024;
/** Most columns or rows the gateway takes. */
const SIZE_MAX = 1000;
/** Input is sent in pieces well under the gateway's 1 MiB message limit. */
const INPUT_PIECE_BYTES = 64 * 1024;

/**
 * Characters a pasted text must not hold: C0 and C1 controls (CR, LF, ESC, DEL, …) and
 * the Unicode line and paragraph separators. Any of them could end the line or drive
 * the terminal, which a path pasted at the prompt must never do.
 */
const UNPASTABLE = /[\p{Cc}\u2028\u2029]/u;

/** Throws unless `text` can be pasted without running or driving anything. */
export function checkPastable(text) {
  if (typeof text !== "string" || text === "" || UNPASTABLE.test(text)) {
    throw new Error("refused to paste text holding a line break or a control character");
  }
  return text;
}

/** xterm.js and its fit addon, loaded once, when the first terminal opens. */
let xterm = null;
function loadXterm() {
  xterm ??= Promise.all([import("./vendor/xterm.mjs"), import("./vendor/addon-fit.mjs")]).then(
    ([{ Terminal }, { FitAddon }]) => ({ Terminal, FitAddon }),
  );
  return xterm;
}

const clampSize = (n) => Math.max(1, Math.min(SIZE_MAX, Math.floor(n) || 1));

/** Splits `bytes` into pieces of at most `size`. */
function* pieces(bytes, size) {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

/**
 * A terminal on node `node` ({id, name}) shown in `screen` (an empty element), with its
 * drops' progress and results in `uploads`. `session` reattaches a terminal the gateway
 * still holds (a reload). `onChange({state, detail, session})` runs on every change:
 * `state` is connecting, connected, disconnected, exited, error or closed; `session` is
 * the id to reattach with, or null once the terminal cannot be reattached.
 */
export function createTerminal({ node, session = null, screen, uploads, onChange }) {
  const encoder = new TextEncoder();
  let term = null;
  let fit = null;
  let observer = null;
  let socket = null;
  let sessionId = session;
  let state = "connecting";
  let detail = "";
  /** The last error message the gateway sent on the open socket. */
  let lastError = null;

  function setState(next, text = "") {
    state = next;
    detail = text;
    if (term) term.options.disableStdin = next !== "connected";
    onChange({ state, detail, session: sessionId });
  }

  function forgetSession() {
    sessionId = null;
  }

  /** Columns and rows that fill the screen element (its current size when hidden). */
  function size() {
    const proposed = screen.clientWidth > 0 && screen.clientHeight > 0 ? fit.proposeDimensions() : null;
    const cols = proposed && Number.isFinite(proposed.cols) ? proposed.cols : term.cols;
    const rows = proposed && Number.isFinite(proposed.rows) ? proposed.rows : term.rows;
    return { cols: clampSize(cols), rows: clampSize(rows) };
  }

  /** Fits the terminal to its element; xterm's onResize then tells the gateway. */
  function refit() {
    if (!term || state === "closed") return;
    const { cols, rows } = size();
    if (cols !== term.cols || rows !== term.rows) term.resize(cols, rows);
  }

  function sendText(message) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  }

  function sendInput(bytes) {
    if (!socket || socket.readyState !== WebSocket.OPEN || state !== "connected") return;
    for (const piece of pieces(bytes, INPUT_PIECE_BYTES)) socket.send(piece);
  }

  function url(withSession) {
    const { cols, rows } = size();
    const query = new URLSearchParams({ cols: String(cols), rows: String(rows) });
    if (withSession) query.set("session", withSession);
    return `/v1/nodes/${encodeURIComponent(node.id)}/terminal?${query}`;
  }

  /**
   * Why the gateway refused the socket: a browser tells nothing about a refused upgrade,
   * so the same route is asked over plain HTTP, whose refusal carries the reason when it
   * comes before the upgrade (the token, the node, its approval, its link, the size, the
   * cap on terminals, the session).
   */
  async function refusal(path) {
    try {
      await request("GET", path);
    } catch (err) {
      if (err instanceof ApiError && err.status !== 0 && !/upgrade|websocket/i.test(err.message)) {
        return err.message;
      }
    }
    return "The gateway did not open the terminal: as many may be open on this node as it keeps (close one), or the gateway could not be reached.";
  }

  function onControl(text, reattaching) {
    let message = null;
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    if (!message || typeof message !== "object") return;
    if (message.type === "ready") {
      if (typeof message.session === "string") sessionId = message.session;
      // A reattach replays the screen's recent output: start from a clean one.
      if (reattaching) term.reset();
      lastError = null;
      setState("connected", typeof message.shell === "string" ? message.shell : "");
      // The gateway may hold the size of the page that opened the terminal first.
      const { cols, rows } = size();
      sendText({ type: "resize", cols, rows });
    } else if (message.type === "exit") {
      forgetSession();
      setState("exited", `exited with ${Number.isInteger(message.code) ? message.code : "no status"}`);
    } else if (message.type === "error") {
      lastError = String(message.error?.message ?? "The terminal failed.");
      // A resize out of range keeps the terminal; anything fatal closes the socket next.
      onChange({ state, detail, session: sessionId, notice: lastError });
    }
  }

  function connect() {
    const reattaching = sessionId;
    const path = url(reattaching);
    const ws = openSocket(path, PROTOCOL);
    socket = ws;
    let opened = false;
    lastError = null;
    setState("connecting");
    ws.addEventListener("open", () => {
      opened = true;
    });
    ws.addEventListener("message", (event) => {
      if (ws !== socket) return;
      if (typeof event.data === "string") onControl(event.data, reattaching);
      else term.write(new Uint8Array(event.data));
    });
    ws.addEventListener("close", async () => {
      if (ws !== socket) return;
      socket = null;
      if (state === "closed" || state === "exited") return;
      if (!opened) {
        if (reattaching) {
          // Gone (ended, or past its grace): a new terminal instead.
          forgetSession();
          connect();
          return;
        }
        forgetSession();
        setState("error", await refusal(path));
        return;
      }
      if (lastError) {
        forgetSession();
        setState("error", lastError);
        return;
      }
      setState("disconnected", "The connection to the gateway closed.");
    });
  }

  /** Stages `files` on the node and pastes their quoted paths at the prompt. */
  async function upload(files) {
    for (const done of uploads.querySelectorAll(".terminal-upload[data-state=done]")) done.remove();
    const item = el("li", { className: "terminal-upload", "data-state": "uploading" });
    uploads.append(item);
    const failures = [];
    const sending = [];
    for (const file of files) {
      if (file.size > UPLOAD_MAX_BYTES) {
        failures.push([
          file.name,
          `${file.size} bytes, over the 16 MiB (${UPLOAD_MAX_BYTES} bytes) a terminal upload takes per file`,
        ]);
        continue;
      }
      try {
        // A dropped folder is listed as a file that cannot be read.
        await file.slice(0, 1).arrayBuffer();
        sending.push(file);
      } catch {
        failures.push([file.name, "could not be read (a folder?): drop files only"]);
      }
    }
    const status = el("span", { className: "upload-status" });
    const progress = el("progress", { max: 1, value: 0, "aria-label": "Terminal upload progress" });
    item.append(el("div", { className: "upload-line" }, status), progress);
    const showFailures = () => {
      for (const [name, message] of failures) {
        const named = name ? [nameNode(name), ": "] : [];
        item.append(el("p", { role: "alert", className: "upload-error" }, ...named, message));
      }
    };
    const finish = (stateName, text) => {
      item.dataset.state = stateName;
      status.textContent = text;
      progress.remove();
      showFailures();
      const dismiss = el("button", { type: "button", className: "icon-button", "aria-label": "Dismiss", title: "Dismiss" });
      dismiss.append(el("span", { className: "icon icon-close", "aria-hidden": "true" }));
      dismiss.addEventListener("click", () => item.remove());
      item.querySelector(".upload-line").append(dismiss);
    };
    if (state !== "connected") {
      failures.unshift(["", "The terminal is not connected: nothing was uploaded."]);
      finish("failed", "Not uploaded");
      return;
    }
    if (!sending.length) {
      finish("failed", "Nothing uploaded");
      return;
    }
    status.textContent = `Uploading ${sending.length === 1 ? "1 file" : `${sending.length} files`}…`;
    const form = new FormData();
    for (const file of sending) form.append("file", file, file.name);
    let answer;
    try {
      answer = await postForm(
        `/v1/nodes/${encodeURIComponent(node.id)}/terminal/upload`,
        form,
        (fraction) => {
          progress.value = fraction;
        },
      ).promise;
    } catch (err) {
      failures.unshift(["", err.message]);
      finish("failed", "Upload failed");
      return;
    }
    const quoted = [];
    for (const result of Array.isArray(answer?.files) ? answer.files : []) {
      const name = String(result?.name ?? "");
      if (result?.error) {
        failures.push([name, String(result.error.message ?? result.error.code ?? "was refused")]);
        continue;
      }
      try {
        quoted.push(checkPastable(result?.quoted));
      } catch (err) {
        failures.push([name, `staged, but its quoted path was not pasted: ${err.message}`]);
      }
    }
    if (quoted.length) {
      const text = checkPastable(quoted.join(" "));
      if (state === "connected") term.paste(text);
      else failures.push(["", "The terminal closed before the paths could be pasted."]);
    }
    const staged = `${quoted.length} of ${files.length} staged${quoted.length ? ", paths pasted" : ""}`;
    finish(failures.length ? "failed" : "done", staged);
  }

  async function start() {
    try {
      const { Terminal, FitAddon } = await loadXterm();
      term = new Terminal({
        cursorBlink: true,
        fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace',
        fontSize: 14,
        scrollback: 5000,
        // Links a program prints (OSC 8) open only when they are http(s), in a new tab
        // that cannot reach this page: the shell is the node's, not the person's.
        linkHandler: { activate: openPrintedLink, allowNonHttpProtocols: false },
      });
      fit = new FitAddon();
      term.loadAddon(fit);
      term.open(screen);
      // The live terminal, for the browser tests and the console: its buffer is what
      // the person sees.
      screen.terminal = term;
      refit();
      term.onData((data) => sendInput(encoder.encode(data)));
      // Mouse reports in the legacy encoding: one byte per character.
      term.onBinary((data) => sendInput(Uint8Array.from(data, (c) => c.charCodeAt(0) & 0xff)));
      term.onResize(({ cols, rows }) => sendText({ type: "resize", cols, rows }));
      observer = new ResizeObserver(() => refit());
      observer.observe(screen);
      acceptFileDrops(screen, (files) => upload(files), () => state === "connected");
      connect();
    } catch (err) {
      forgetSession();
      setState("error", `The terminal could not start: ${err.message}`);
    }
  }

  start();

  return {
    get state() {
      return state;
    },
    get session() {
      return sessionId;
    },
    /** Refits (after the pane became visible) and gives the terminal the keyboard. */
    focus() {
      refit();
      term?.focus();
    },
    refit,
    /** Reattaches after the connection dropped (the gateway keeps it for 30 s). */
    reconnect() {
      if (state === "disconnected" && term) connect();
    },
    /** The person closed it: the gateway ends the shell now. */
    close() {
      const ws = socket;
      forgetSession();
      setState("closed");
      socket = null;
      if (ws) {
        if (ws.readyState === WebSocket.OPEN) {
          ws.send(JSON.stringify({ type: "close" }));
          ws.close(1000);
        } else {
          ws.close();
        }
      }
      observer?.disconnect();
      term?.dispose();
    },
  };
}
