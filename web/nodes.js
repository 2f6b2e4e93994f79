// The Nodes panel (admins only; spec nodes N-ADMIN, N-TERM): the paired nodes with their
// platform, shell, state, connection and commands; approving and refusing pairings and
// pairing upgrades; and node terminals, one tab each. Whether the token is an admin's is
// the gateway's to say (`GET /v1/me`); the node routes answer 404 to anyone else.

import { request } from "./api.js";
import { confirmDialog } from "./dialogs.js";
import { el, nameNode, showAlertIn } from "./format.js";
import { createTerminal } from "./terminal.js";

/** The terminals open in this tab, `[{node, session}]`, so a reload reattaches them. */
const TERMINALS_KEY = "ferry.terminals";

const STATE_LABELS = { pending: "Pending", approved: "Approved", revoked: "Revoked" };
const TERMINAL_STATES = {
  connecting: "Connecting…",
  connected: "Connected",
  disconnected: "Disconnected",
  exited: "Exited",
  error: "Failed",
  closed: "Closed",
};

const list = (value) => (Array.isArray(value) ? value.map(String) : []);

/** What the node serves now: approved ∩ advertised, nothing unless approved. */
const served = (node) =>
  node.state === "approved" ? list(node.advertisedCommands).filter((c) => list(node.approvedCommands).includes(c)) : [];

function readStored() {
  try {
    const stored = JSON.parse(sessionStorage.getItem(TERMINALS_KEY) || "[]");
    return Array.isArray(stored)
      ? stored.filter((t) => t && typeof t.node === "string" && typeof t.session === "string")
      : [];
  } catch {
    return [];
  }
}

/**
 * `onAvailable(isAdmin)` runs after each load that tells whether the panel applies;
 * `onPending(count)` with the number of pairings and upgrades waiting for a decision.
 */
export function createNodesPanel({ onAvailable, onPending }) {
  const panel = document.getElementById("nodes");
  const alerts = document.getElementById("nodes-alerts");
  const rows = document.getElementById("nodes-rows");
  const table = document.getElementById("nodes-table");
  const empty = document.getElementById("nodes-empty");
  const tabList = document.getElementById("terminal-tabs");
  const panes = document.getElementById("terminal-panes");
  const terminalsNote = document.getElementById("terminals-note");

  let nodes = [];
  /** Whether the token is an admin's; null until the gateway said. */
  let admin = null;
  let restored = false;
  let loading = null;
  let reloadWanted = false;
  /** Open terminal tabs, in order: {key, node, tab, pane, terminal, status, reconnect}. */
  let terminals = [];
  let counter = 0;

  const showAlert = (message) => showAlertIn(alerts, message, "Dismiss the nodes message");

  function store() {
    const open = terminals.filter((t) => t.terminal.session).map((t) => ({ node: t.node.id, session: t.terminal.session }));
    if (open.length) sessionStorage.setItem(TERMINALS_KEY, JSON.stringify(open));
    else sessionStorage.removeItem(TERMINALS_KEY);
  }

  // ---------------------------------------------------------------- the table

  function commandsCell(node) {
    const cell = el("td", { className: "node-commands", "data-label": "Commands" });
    const approved = served(node);
    const waiting = list(node.pendingCommands);
    if (approved.length) cell.append(el("p", null, el("span", { className: "muted" }, "Approved: "), approved.join(", ")));
    if (waiting.length) {
      cell.append(
        el(
          "p",
          { className: node.state === "approved" ? "node-upgrade" : null },
          el("span", { className: "muted" }, node.state === "approved" ? "Waiting for approval: " : "Advertised: "),
          waiting.join(", "),
        ),
      );
    }
    if (!approved.length && !waiting.length) cell.append(el("span", { className: "muted" }, "None"));
    return cell;
  }

  function actionButton(label, accessibleName, className, onClick) {
    const button = el("button", { type: "button", className: `button ${className}`, "aria-label": accessibleName }, label);
    button.addEventListener("click", () => onClick(button));
    return button;
  }

  async function approve(node, button) {
    button.disabled = true;
    try {
      await request("POST", `/v1/nodes/${encodeURIComponent(node.id)}/approve`);
      alerts.replaceChildren();
    } catch (err) {
      showAlert(err.message);
    }
    load();
  }

  function revoke(node, { title, confirmLabel }) {
    confirmDialog({
      title,
      detail: `${node.name} will serve nothing, its terminals end, and it cannot be approved again: to pair it again, it needs a new key.`,
      confirmLabel,
      action: () => request("DELETE", `/v1/nodes/${encodeURIComponent(node.id)}`),
    }).then((done) => {
      if (done) load();
    });
  }

  function actionsCell(node) {
    const cell = el("td", { className: "node-actions" });
    const name = node.name;
    if (node.state === "pending") {
      cell.append(
        actionButton("Approve", `Approve ${name}`, "button-primary", (b) => approve(node, b)),
        actionButton("Refuse", `Refuse ${name}`, "", () =>
          revoke(node, { title: `Refuse ${name}?`, confirmLabel: "Refuse" }),
        ),
      );
    } else if (node.state === "approved") {
      if (list(node.pendingCommands).length) {
        cell.append(actionButton("Approve upgrade", `Approve upgrade of ${name}`, "button-primary", (b) => approve(node, b)));
      }
      if (served(node).includes("terminal.open")) {
        const open = actionButton("Open terminal", `Open a terminal on ${name}`, "", () => openTerminal(node, null, true));
        if (!node.connected) {
          open.disabled = true;
          open.title = "The node is not connected";
        }
        cell.append(open);
      }
      cell.append(
        actionButton("Revoke", `Revoke ${name}`, "button-quiet", () =>
          revoke(node, { title: `Revoke ${name}?`, confirmLabel: "Revoke" }),
        ),
      );
    } else {
      cell.append(el("span", { className: "muted" }, "No actions"));
    }
    return cell;
  }

  function row(node) {
    const state = STATE_LABELS[node.state] ?? String(node.state);
    const upgrade = node.state === "approved" && list(node.pendingCommands).length > 0;
    return el(
      "tr",
      { "data-node": node.id, "data-state": node.state },
      el(
        "th",
        { scope: "row", className: "node-name" },
        nameNode(node.name),
        el("span", { className: "node-id muted" }, node.id),
      ),
      el("td", { "data-label": "Platform" }, String(node.platform ?? "")),
      el("td", { "data-label": "Shell" }, String(node.shell ?? "")),
      el(
        "td",
        { "data-label": "State" },
        el("span", { className: `badge badge-${node.state}` }, state),
        upgrade ? el("span", { className: "badge badge-upgrade" }, "Upgrade") : null,
      ),
      el(
        "td",
        { "data-label": "Connection" },
        el(
          "span",
          { className: `connection ${node.connected ? "is-connected" : "is-offline"}` },
          node.connected ? "Connected" : "Offline",
        ),
      ),
      commandsCell(node),
      actionsCell(node),
    );
  }

  function render() {
    // A focused button is about to be replaced: keep the keyboard on the same row.
    const focused = document.activeElement;
    const focusedNode = rows.contains(focused) ? focused.closest("tr")?.dataset.node : null;
    const focusedLabel = focused?.getAttribute?.("aria-label");
    rows.replaceChildren(...nodes.map(row));
    table.hidden = nodes.length === 0;
    empty.hidden = nodes.length !== 0;
    if (focusedNode) {
      const again = rows.querySelector(`tr[data-node="${CSS.escape(focusedNode)}"]`);
      const button = Array.from(again?.querySelectorAll("button") ?? []).find(
        (b) => b.getAttribute("aria-label") === focusedLabel && !b.disabled,
      );
      (button ?? again?.querySelector("button:not(:disabled)"))?.focus();
    }
    onPending(nodes.filter((n) => n.state === "pending" || (n.state === "approved" && list(n.pendingCommands).length)).length);
  }

  /** Fetches the nodes; one request at a time, a call meanwhile asks for one more. */
  function load() {
    if (loading) {
      reloadWanted = true;
      return loading;
    }
    loading = (async () => {
      try {
        if (admin === null) {
          const me = await request("GET", "/v1/me");
          admin = me?.admin === true;
          if (!admin) onAvailable(false);
        }
        if (!admin) return;
        const answer = await request("GET", "/v1/nodes");
        nodes = Array.isArray(answer?.nodes) ? answer.nodes.filter((n) => n && typeof n.id === "string") : [];
        nodes.sort((a, b) => String(a.name).localeCompare(String(b.name)) || a.id.localeCompare(b.id));
        render();
        onAvailable(true);
        if (!restored) {
          restored = true;
          restore();
        }
      } catch (err) {
        if (err.status === 404) {
          // No longer an admin's token, or a gateway without nodes: no panel.
          admin = false;
          onAvailable(false);
        } else if (admin && err.status !== 401) {
          showAlert(err.message);
        }
      } finally {
        loading = null;
      }
      if (reloadWanted) {
        reloadWanted = false;
        load();
      }
    })();
    return loading;
  }

  // ---------------------------------------------------------------- terminals

  function select(entry, { focus = false } = {}) {
    for (const t of terminals) {
      const on = t === entry;
      t.tab.setAttribute("aria-selected", on ? "true" : "false");
      t.tab.tabIndex = on ? 0 : -1;
      t.pane.hidden = !on;
    }
    if (focus) entry.tab.focus();
    entry.terminal.refit();
  }

  function showTerminalsNote() {
    terminalsNote.hidden = terminals.length !== 0;
  }

  function closeTerminal(entry) {
    const at = terminals.indexOf(entry);
    entry.terminal.close();
    entry.tab.remove();
    entry.pane.remove();
    terminals.splice(at, 1);
    store();
    showTerminalsNote();
    const next = terminals[Math.min(at, terminals.length - 1)];
    if (next) select(next, { focus: true });
  }

  function updateTab(entry, { state, detail, notice }) {
    entry.tab.dataset.state = state;
    entry.tabState.textContent = TERMINAL_STATES[state] ?? state;
    const words = TERMINAL_STATES[state] ?? state;
    entry.status.textContent = detail ? `${words}: ${detail}` : words;
    entry.pane.dataset.state = state;
    entry.reconnect.hidden = state !== "disconnected";
    if (notice) showAlertIn(entry.alerts, notice, "Dismiss the terminal message");
    else if (state === "error") showAlertIn(entry.alerts, detail, "Dismiss the terminal message");
    store();
  }

  /** Opens a terminal tab on `node`; `session` reattaches one the gateway still holds. */
  function openTerminal(node, session, focus) {
    counter += 1;
    const key = `terminal-${counter}`;
    const sameNode = terminals.filter((t) => t.node.id === node.id).length;
    const title = sameNode ? `${node.name} (${sameNode + 1})` : node.name;
    const tabState = el("span", { className: "terminal-tab-state" });
    const tab = el(
      "button",
      {
        type: "button",
        role: "tab",
        id: `${key}-tab`,
        className: "terminal-tab",
        "aria-controls": `${key}-pane`,
        "aria-selected": "false",
        tabIndex: -1,
      },
      el("span", { className: "terminal-tab-dot", "aria-hidden": "true" }),
      nameNode(title),
      tabState,
    );
    const status = el("p", { className: "terminal-status", role: "status" });
    const reconnect = el("button", { type: "button", className: "button", hidden: true }, "Reconnect");
    const close = el("button", { type: "button", className: "button", "aria-label": `Close the terminal on ${title}` }, "Close terminal");
    const alertsBox = el("div", { className: "alerts" });
    const uploads = el("ul", { className: "uploads", role: "list", "aria-label": `Uploads to ${title}` });
    const screen = el("div", { className: "terminal-screen" });
    const pane = el(
      "section",
      { role: "tabpanel", id: `${key}-pane`, className: "terminal-pane", "aria-labelledby": `${key}-tab`, hidden: true },
      el("div", { className: "terminal-head" }, status, el("div", { className: "toolbar" }, reconnect, close)),
      alertsBox,
      uploads,
      screen,
      el("p", { className: "drop-hint", "aria-hidden": "true" }, "Drop files to stage them on the node and paste their paths"),
    );
    const entry = { key, node, tab, tabState, pane, status, reconnect, alerts: alertsBox, terminal: null };
    terminals.push(entry);
    tabList.append(tab);
    panes.append(pane);
    showTerminalsNote();
    tab.addEventListener("click", () => select(entry));
    close.addEventListener("click", () => closeTerminal(entry));
    reconnect.addEventListener("click", () => entry.terminal.reconnect());
    pane.hidden = false;
    entry.terminal = createTerminal({
      node,
      session,
      screen,
      uploads,
      onChange: (change) => {
        if (entry.terminal) updateTab(entry, change);
      },
    });
    select(entry);
    if (focus) entry.terminal.focus();
    store();
    return entry;
  }

  /** Reattaches the terminals this browser tab had open before a reload. */
  function restore() {
    const stored = readStored();
    let last = null;
    for (const { node: id, session } of stored) {
      const node = nodes.find((n) => n.id === id);
      if (node) last = openTerminal(node, session, false);
    }
    store();
    if (last) select(last);
  }

  // Arrow keys move between tabs (the ARIA tabs pattern); Tab goes into the pane.
  tabList.addEventListener("keydown", (event) => {
    const at = terminals.findIndex((t) => t.tab === document.activeElement);
    if (at < 0) return;
    const moves = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: terminals.length - 1 };
    if (!(event.key in moves)) return;
    event.preventDefault();
    const next = terminals[(moves[event.key] + terminals.length) % terminals.length];
    select(next, { focus: true });
  });

  return {
    load,
    /** The panel became visible: fit the shown terminal to it. */
    shown() {
      terminals.find((t) => !t.pane.hidden)?.terminal.refit();
    },
    /** Signed out: close every terminal (the gateway ends them) and forget the nodes. */
    reset() {
      for (const entry of [...terminals]) closeTerminal(entry);
      sessionStorage.removeItem(TERMINALS_KEY);
      nodes = [];
      admin = null;
      restored = false;
      rows.replaceChildren();
      alerts.replaceChildren();
      panel.hidden = true;
      onAvailable(false);
    },
  };
}
