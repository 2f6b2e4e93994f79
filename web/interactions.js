// Requests from the agent that need the person: approve a deletion, or pick a file on
// this computer for it. GET /v1/interactions lists what is pending; the page asks again
// on every `interaction` event and every (re)connection of the event stream. A picked file
// goes to the request's signed upload link, which needs no token.

import { postForm, request } from "./api.js";
import { el, formatChatTime, nameNode, shownName, textWithNames } from "./format.js";

/** A refresh shortly after the earliest request expires, so it leaves the screen. */
const EXPIRY_GRACE_MS = 500;
/** Answers the server gives when a request can no longer be answered: drop it. */
const GONE_STATUSES = new Set([404, 409, 410]);

let nextTitle = 0;

export function createInteractions({ region, list, status }) {
  /** id → {node, busy} of every request on screen. */
  const shown = new Map();
  let loading = null;
  let loadAgain = false;
  let expiryTimer = null;
  let generation = 0;

  function announce(message) {
    // Cleared first so that the same sentence twice is announced twice.
    status.textContent = "";
    setTimeout(() => {
      status.textContent = message;
    }, 50);
  }

  function updateVisibility() {
    region.hidden = shown.size === 0;
  }

  function remove(id) {
    const entry = shown.get(id);
    if (!entry) return;
    // Keep keyboard users in the region rather than dropping focus to the page's start.
    const hadFocus = entry.node.contains(document.activeElement);
    entry.node.remove();
    shown.delete(id);
    updateVisibility();
    if (hadFocus) {
      const next = list.querySelector("button:not([disabled])");
      if (next) next.focus();
    }
  }

  function errorSlot(node) {
    return node.querySelector(".interaction-error");
  }

  function showError(node, message) {
    errorSlot(node).replaceChildren(el("p", { role: "alert", className: "alert" }, nameNode(message, "shown-text")));
  }

  function meta(item) {
    const until = formatChatTime(item.expires);
    return until ? el("p", { className: "interaction-meta muted" }, `Answer by ${until}.`) : null;
  }

  // ------------------------------------------------------------------ approvals

  function approvalView(item) {
    const titleId = `interaction-title-${++nextTitle}`;
    const deleting = item.tool === "file_delete";
    const subject = el("code", null, nameNode(item.subject));
    const title = deleting
      ? ["The agent asks to delete ", subject]
      : ["The agent asks to use ", nameNode(item.tool), " on ", subject];
    const [noLabel, yesLabel] = deleting ? ["Keep", "Delete"] : ["Deny", "Allow"];
    const no = el("button", { type: "button", className: "button", "aria-describedby": titleId }, noLabel);
    const yes = el(
      "button",
      {
        type: "button",
        className: deleting ? "button button-danger" : "button button-primary",
        "aria-describedby": titleId,
      },
      yesLabel,
    );
    const node = el(
      "article",
      { className: "interaction", "data-id": item.id, "data-kind": "approval", "aria-labelledby": titleId },
      el("h3", { id: titleId, className: "interaction-title" }, ...title),
      item.summary ? el("p", { className: "interaction-text" }, textWithNames(item.summary, [item.subject])) : null,
      meta(item),
      el("div", { className: "interaction-error" }),
      el("div", { className: "interaction-actions" }, no, yes),
    );

    const answer = async (approve) => {
      const entry = shown.get(item.id);
      if (!entry || entry.busy) return;
      entry.busy = true;
      no.disabled = true;
      yes.disabled = true;
      errorSlot(node).replaceChildren();
      try {
        await request("POST", `/v1/approvals/${encodeURIComponent(item.id)}`, { json: { approve } });
        entry.busy = false;
        remove(item.id);
        announce(`${approve ? yesLabel : noLabel}: ${shownName(item.subject)}.`);
      } catch (err) {
        entry.busy = false;
        if (GONE_STATUSES.has(err.status)) {
          remove(item.id);
          announce(err.message);
          return;
        }
        no.disabled = false;
        yes.disabled = false;
        showError(node, err.message);
      }
    };
    no.addEventListener("click", () => answer(false));
    yes.addEventListener("click", () => answer(true));
    return node;
  }

  // ------------------------------------------------------------------ picks

  function pickView(item) {
    const titleId = `interaction-title-${++nextTitle}`;
    const input = el("input", { type: "file", hidden: true, "aria-label": "File for the agent" });
    const choose = el(
      "button",
      { type: "button", className: "button button-primary", "aria-describedby": titleId },
      el("span", { className: "icon icon-upload", "aria-hidden": "true" }),
      "Upload file",
    );
    const cancel = el("button", { type: "button", className: "button", "aria-describedby": titleId }, "Cancel");
    const progressSlot = el("div", { className: "interaction-progress" });
    const node = el(
      "article",
      { className: "interaction", "data-id": item.id, "data-kind": "pick", "aria-labelledby": titleId },
      el("h3", { id: titleId, className: "interaction-title" }, "The agent asks for a file"),
      el("p", { className: "interaction-text" }, nameNode(item.prompt, "shown-text")),
      el(
        "p",
        { className: "interaction-meta muted" },
        "Only the file you choose is sent, never where it is on your computer.",
      ),
      meta(item),
      progressSlot,
      el("div", { className: "interaction-error" }),
      el("div", { className: "interaction-actions" }, cancel, choose, input),
    );

    let abort = null;

    choose.addEventListener("click", () => input.click());
    input.addEventListener("change", () => {
      const file = input.files && input.files[0];
      input.value = "";
      if (file) upload(file);
    });

    async function upload(file) {
      const entry = shown.get(item.id);
      if (!entry || entry.busy) return;
      entry.busy = true;
      choose.disabled = true;
      errorSlot(node).replaceChildren();
      const progress = el("progress", { max: 1, value: 0, "aria-label": `Upload progress of ${shownName(file.name)}` });
      progressSlot.replaceChildren(el("p", { className: "interaction-file" }, nameNode(file.name)), progress);
      const form = new FormData();
      form.append("file", file, file.name);
      const sending = postForm(item.uploadUrl, form, (fraction) => (progress.value = fraction), {
        withToken: false,
      });
      abort = sending.abort;
      try {
        const answer = await sending.promise;
        entry.busy = false;
        remove(item.id);
        announce(`Sent ${shownName(answer?.name ?? file.name)} to the agent.`);
      } catch (err) {
        abort = null;
        // Stopped by Cancel, which takes it from here.
        if (err.code === "aborted") return;
        entry.busy = false;
        if (GONE_STATUSES.has(err.status) && err.status !== 409) {
          remove(item.id);
          announce(err.message);
          return;
        }
        progressSlot.replaceChildren();
        choose.disabled = false;
        showError(node, err.message);
      }
    }

    cancel.addEventListener("click", async () => {
      if (abort) abort();
      cancel.disabled = true;
      choose.disabled = true;
      const entry = shown.get(item.id);
      if (entry) entry.busy = true;
      try {
        await request("POST", `/v1/picks/${encodeURIComponent(item.id)}/cancel`, { json: {} });
        if (entry) entry.busy = false;
        remove(item.id);
        announce("Told the agent you will not send a file.");
      } catch (err) {
        if (entry) entry.busy = false;
        if (GONE_STATUSES.has(err.status)) {
          remove(item.id);
          announce(err.message);
          return;
        }
        cancel.disabled = false;
        choose.disabled = false;
        showError(node, err.message);
      }
    });
    return node;
  }

  // ------------------------------------------------------------------ the list

  function render(items) {
    const pending = new Set(items.map((i) => i.id));
    for (const [id, entry] of shown) {
      // A request being answered stays until its answer returns.
      if (!pending.has(id) && !entry.busy) remove(id);
    }
    const added = [];
    for (const item of items) {
      if (shown.has(item.id)) continue;
      const node = item.kind === "pick" ? pickView(item) : approvalView(item);
      shown.set(item.id, { node, busy: false });
      list.append(node);
      added.push(item);
    }
    updateVisibility();
    if (added.length === 1) {
      const item = added[0];
      announce(
        item.kind === "pick"
          ? `The agent asks for a file: ${shownName(item.prompt)}`
          : `The agent asks to ${item.tool === "file_delete" ? "delete" : `use ${shownName(item.tool)} on`} ${shownName(item.subject)}.`,
      );
    } else if (added.length > 1) {
      announce(`The agent has ${added.length} new requests for you.`);
    }
    scheduleExpiry(items);
  }

  function scheduleExpiry(items) {
    clearTimeout(expiryTimer);
    const times = items.map((i) => Date.parse(i.expires)).filter((t) => Number.isFinite(t));
    if (!times.length) return;
    const wait = Math.max(0, Math.min(...times) - Date.now()) + EXPIRY_GRACE_MS;
    // setTimeout's longest delay is about 24.8 days; requests never live that long.
    expiryTimer = setTimeout(() => refresh(), Math.min(wait, 2 ** 31 - 1));
  }

  /** Loads the pending requests; calls made while one runs are folded into one more. */
  function refresh() {
    if (loading) {
      loadAgain = true;
      return loading;
    }
    const mine = generation;
    loading = (async () => {
      try {
        do {
          loadAgain = false;
          const answer = await request("GET", "/v1/interactions");
          if (mine !== generation) return;
          render((answer && Array.isArray(answer.interactions) && answer.interactions) || []);
        } while (loadAgain && mine === generation);
      } catch (err) {
        // The next event or reconnection asks again; a 401 is handled by the sign-in.
        if (err && err.status !== 401) console.warn("loading the agent's requests:", err.message);
      } finally {
        loading = null;
      }
    })();
    return loading;
  }

  /** Forgets everything (sign-out). */
  function reset() {
    generation += 1;
    clearTimeout(expiryTimer);
    for (const id of [...shown.keys()]) {
      shown.get(id).busy = false;
      remove(id);
    }
    status.textContent = "";
    region.hidden = true;
  }

  return { refresh, reset };
}
