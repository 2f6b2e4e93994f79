// The trash and share links of the Files panel (spec M-DAILY): a delete goes to the
// trash and says so with an Undo; the Trash dialog lists what was deleted, with Restore
// and Delete forever; the Share dialog makes a link to one file that expires (1 hour,
// 1 day, 7 days), shows it with a Copy button, and lists and revokes the live links.

import { request } from "./api.js";
import { confirmDialog } from "./dialogs.js";
import { el, formatSize, formatTime, nameNode, showAlertIn } from "./format.js";

/** The lives a link may be given in the Share dialog, in seconds. */
const SHARE_LIVES = [
  ["1 hour", 3600],
  ["1 day", 86400],
  ["7 days", 7 * 86400],
];

/** `DELETE /v1/files` into the trash; resolves to the entry's trash id. */
export async function deleteToTrash(path, project) {
  const response = await request("DELETE", "/v1/files", { query: { path, project }, raw: true });
  return response.headers.get("ferry-trash-id");
}

/** `POST /v1/trash/{id}/restore`; resolves to `{path, project}`. */
function restore(id, name) {
  return request("POST", `/v1/trash/${encodeURIComponent(id)}/restore`, {
    json: name ? { name } : {},
  });
}

/** The share link `url` (relative to the gateway) as a whole address. */
function absolute(url) {
  return new URL(url, window.location.origin).href;
}

/** Copies `text`; falls back to selecting `input` for the person to copy. */
async function copy(text, input) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    if (input) {
      input.focus();
      input.select();
    }
    return false;
  }
}

function dialogShell(id, titleId) {
  const dialog = el("dialog", { id, className: "dialog dialog-wide", "aria-labelledby": titleId });
  document.body.append(dialog);
  return dialog;
}

/**
 * What a failure does in one of these dialogs: a lost sign-in closes it (the page asks
 * for a token again), anything else is said inside it, in `place`.
 */
function failIn(dialog, place) {
  return (err) => {
    if (err && err.status === 401) {
      dialog.close();
      return;
    }
    place.replaceChildren(
      el("p", { role: "alert", className: "alert" }, nameNode(err && err.message ? err.message : String(err), "shown-text")),
    );
  };
}

export function createTrashAndShares({ alerts, reload }) {
  // ------------------------------------------------------------------ delete + undo

  /** After a delete: "Moved … to the trash." with Undo, in the panel's alerts. */
  function showTrashed(path, id) {
    const name = path.split("/").pop();
    const undo = el("button", { type: "button", className: "button", "aria-label": `Undo delete of ${name}` }, "Undo");
    const text = el("p", { className: "notice-text" }, "Moved ", nameNode(name), " to the trash.");
    const box = el("div", { className: "notice-box", role: "status" }, text, undo);
    undo.addEventListener("click", async () => {
      undo.disabled = true;
      try {
        const back = await restore(id);
        box.replaceChildren(el("p", { className: "notice-text" }, "Restored ", nameNode(back.path), "."));
        reload(back.path);
      } catch (err) {
        if (err && err.status === 401) return;
        showAlertIn(alerts, err && err.message ? err.message : String(err), "Dismiss message");
      }
    });
    alerts.replaceChildren(box);
  }

  // ------------------------------------------------------------------ the trash view

  const trash = dialogShell("trash-dialog", "trash-title");
  const trashStatus = el("p", { className: "note", id: "trash-status" });
  const trashError = el("div", { className: "dialog-error" });
  const trashList = el("ul", { className: "item-list", "aria-label": "Deleted files" });
  const trashClose = el("button", { type: "button", className: "button" }, "Close");
  trash.append(
    el("h2", { id: "trash-title", className: "dialog-title" }, "Trash"),
    trashStatus,
    trashError,
    trashList,
    el("div", { className: "dialog-actions" }, trashClose),
  );
  trashClose.addEventListener("click", () => trash.close());

  const trashFailed = failIn(trash, trashError);

  function trashRow(entry) {
    const where = entry.project ? `${entry.path} in ${entry.project}` : entry.path;
    const size = entry.type === "dir" ? `folder, ${formatSize(entry.size)}` : formatSize(entry.size);
    const restoreButton = el(
      "button",
      { type: "button", className: "button button-primary", "aria-label": `Restore ${entry.name}` },
      "Restore",
    );
    const forever = el(
      "button",
      { type: "button", className: "button", "aria-label": `Delete ${entry.name} forever` },
      "Delete forever",
    );
    restoreButton.addEventListener("click", async () => {
      trashError.replaceChildren();
      try {
        const back = await restore(entry.id);
        await showTrash();
        trashStatus.textContent = `Restored ${back.path}.`;
        reload(back.path);
      } catch (err) {
        trashFailed(err);
      }
    });
    forever.addEventListener("click", async () => {
      trashError.replaceChildren();
      const done = await confirmDialog({
        title: ["Delete ", nameNode(entry.name), " forever?"],
        detail: "It cannot be restored afterwards.",
        confirmLabel: "Delete forever",
        action: () => request("DELETE", `/v1/trash/${encodeURIComponent(entry.id)}`),
      });
      if (done) {
        await showTrash();
      }
    });
    return el(
      "li",
      { className: "item", "data-id": entry.id },
      el(
        "div",
        { className: "item-text" },
        el("p", { className: "item-name" }, nameNode(entry.name)),
        el(
          "p",
          { className: "item-meta" },
          nameNode(where, "shown-text"),
          ` · ${size} · deleted ${formatTime(entry.deletedAt)} · kept until ${formatTime(entry.expiresAt)}`,
        ),
      ),
      el("div", { className: "item-actions" }, restoreButton, forever),
    );
  }

  async function showTrash() {
    const listed = await request("GET", "/v1/trash");
    const entries = listed.entries || [];
    trashStatus.textContent = entries.length
      ? `${formatSize(listed.bytes)} of ${formatSize(listed.maxBytes)} used. Deleted files are removed for good when their time is up.`
      : "The trash is empty.";
    trashList.replaceChildren(...entries.map(trashRow));
    trashList.hidden = entries.length === 0;
  }

  async function openTrash() {
    trashError.replaceChildren();
    trashStatus.textContent = "";
    trashList.replaceChildren();
    if (!trash.open) trash.showModal();
    try {
      await showTrash();
    } catch (err) {
      trashFailed(err);
    }
    trashClose.focus();
  }

  // ------------------------------------------------------------------ share links

  const share = dialogShell("share-dialog", "share-title");
  const shareTitle = el("h2", { id: "share-title", className: "dialog-title" });
  const life = el(
    "select",
    { id: "share-life" },
    ...SHARE_LIVES.map(([label, secs]) => el("option", { value: String(secs) }, label)),
  );
  life.value = "86400";
  const create = el("button", { type: "button", className: "button button-primary" }, "Create link");
  const shareError = el("div", { className: "dialog-error" });
  const linkField = el("input", { id: "share-link", type: "text", readOnly: true, spellcheck: false });
  const copyButton = el("button", { type: "button", className: "button" }, "Copy");
  const copied = el("p", { className: "note", role: "status" });
  const made = el(
    "div",
    { className: "share-made" },
    el("label", { className: "field-label", htmlFor: "share-link" }, "Link"),
    el("div", { className: "share-link-row" }, linkField, copyButton),
    copied,
  );
  made.hidden = true;
  const liveTitle = el("h3", { id: "share-live-title", className: "item-heading" }, "Live links");
  const liveList = el("ul", { className: "item-list", "aria-labelledby": "share-live-title" });
  const liveNone = el("p", { className: "note" }, "No live links.");
  const shareClose = el("button", { type: "button", className: "button" }, "Close");
  share.append(
    shareTitle,
    el("p", { className: "dialog-detail" }, "Anyone with the link can download this file, without signing in, until it expires or you revoke it."),
    el(
      "div",
      { className: "share-make" },
      el("label", { className: "field-label", htmlFor: "share-life" }, "Link expires after"),
      el("div", { className: "share-link-row" }, life, create),
    ),
    shareError,
    made,
    liveTitle,
    liveNone,
    liveList,
    el("div", { className: "dialog-actions" }, shareClose),
  );
  shareClose.addEventListener("click", () => share.close());

  let sharing = null;

  const shareFailed = failIn(share, shareError);

  copyButton.addEventListener("click", async () => {
    copied.textContent = (await copy(linkField.value, linkField)) ? "Copied." : "Selected: press Ctrl+C to copy.";
  });

  create.addEventListener("click", async () => {
    if (!sharing) return;
    shareError.replaceChildren();
    create.disabled = true;
    try {
      const body = { path: sharing.path, expiresInSecs: Number(life.value) };
      if (sharing.project) body.project = sharing.project;
      const link = await request("POST", "/v1/shares", { json: body });
      linkField.value = absolute(link.url);
      copied.textContent = `Works until ${formatTime(link.expiresAt)}.`;
      made.hidden = false;
      linkField.focus();
      linkField.select();
      await showLive();
    } catch (err) {
      shareFailed(err);
    } finally {
      create.disabled = false;
    }
  });

  function liveRow(link) {
    const copyLink = el("button", { type: "button", className: "button", "aria-label": `Copy link to ${link.name}` }, "Copy");
    const revoke = el("button", { type: "button", className: "button", "aria-label": `Revoke link to ${link.name}` }, "Revoke");
    copyLink.addEventListener("click", async () => {
      linkField.value = absolute(link.url);
      made.hidden = false;
      copied.textContent = (await copy(linkField.value, linkField)) ? "Copied." : "Selected: press Ctrl+C to copy.";
    });
    revoke.addEventListener("click", async () => {
      shareError.replaceChildren();
      try {
        await request("DELETE", `/v1/shares/${encodeURIComponent(link.id)}`);
        if (linkField.value === absolute(link.url)) {
          made.hidden = true;
          linkField.value = "";
        }
        await showLive();
      } catch (err) {
        shareFailed(err);
      }
    });
    const where = link.project ? `${link.path} in ${link.project}` : link.path;
    return el(
      "li",
      { className: "item", "data-id": link.id },
      el(
        "div",
        { className: "item-text" },
        el("p", { className: "item-name" }, nameNode(link.name)),
        el("p", { className: "item-meta" }, nameNode(where, "shown-text"), ` · until ${formatTime(link.expiresAt)}`),
      ),
      el("div", { className: "item-actions" }, copyLink, revoke),
    );
  }

  async function showLive() {
    const listed = await request("GET", "/v1/shares");
    const links = listed.shares || [];
    liveList.replaceChildren(...links.map(liveRow));
    liveList.hidden = links.length === 0;
    liveNone.hidden = links.length !== 0;
  }

  async function openShare(node, project) {
    sharing = { path: node.path, project };
    shareTitle.replaceChildren("Share ", nameNode(node.name));
    shareError.replaceChildren();
    made.hidden = true;
    linkField.value = "";
    copied.textContent = "";
    if (!share.open) share.showModal();
    life.focus();
    try {
      await showLive();
    } catch (err) {
      shareFailed(err);
    }
  }

  return { showTrashed, openTrash, openShare };
}
