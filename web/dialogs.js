// Modal dialogs (`<dialog>` + showModal; Escape closes): a one-field prompt and a
// confirmation. Each runs an async action on OK; an API error stays in the dialog as an
// alert with the server's message, so the person can correct the value or cancel.

import { el, nameNode } from "./format.js";

function parts(dialog) {
  return {
    form: dialog.querySelector("form"),
    title: dialog.querySelector(".dialog-title"),
    detail: dialog.querySelector(".dialog-detail"),
    errorSlot: dialog.querySelector(".dialog-error"),
    ok: dialog.querySelector("button[type=submit]"),
    cancel: dialog.querySelector("button.cancel"),
  };
}

function showError(slot, message) {
  // A fresh alert element each time, so assistive technology announces it.
  slot.replaceChildren(el("p", { role: "alert", className: "alert" }, nameNode(message, "shown-text")));
}

/** A title or detail: a string, or strings and nodes (names come as `nameNode`s). */
function setContent(element, content) {
  element.replaceChildren(...(Array.isArray(content) ? content : [content || ""]));
}

const isEmpty = (content) => !content || (Array.isArray(content) && content.length === 0);

let current = null;

/**
 * Opens `dialog` and resolves true once `action` succeeded, false when cancelled.
 * `prepare` fills the dialog's fields; `readValue` returns the value or throws a
 * message to show.
 */
function run(dialog, { title, detail, okLabel, cancelLabel, prepare, readValue, action, focus }) {
  if (current) {
    current.finish(false);
  }
  const p = parts(dialog);
  setContent(p.title, title);
  if (p.detail) {
    setContent(p.detail, detail);
    p.detail.hidden = isEmpty(detail);
  }
  p.errorSlot.replaceChildren();
  p.ok.textContent = okLabel;
  p.ok.disabled = false;
  p.cancel.textContent = cancelLabel || "Cancel";
  if (prepare) {
    prepare();
  }

  return new Promise((resolve) => {
    let busy = false;
    const finish = (result) => {
      p.form.removeEventListener("submit", onSubmit);
      p.cancel.removeEventListener("click", onCancel);
      dialog.removeEventListener("close", onClose);
      if (current && current.dialog === dialog) {
        current = null;
      }
      if (dialog.open) {
        dialog.close();
      }
      resolve(result);
    };
    const onSubmit = async (event) => {
      event.preventDefault();
      if (busy) {
        return;
      }
      let value;
      try {
        value = readValue ? readValue() : undefined;
      } catch (message) {
        showError(p.errorSlot, String(message));
        return;
      }
      busy = true;
      p.ok.disabled = true;
      try {
        await action(value);
        finish(true);
      } catch (err) {
        if (!dialog.open) {
          return;
        }
        if (err && err.status === 401) {
          finish(false);
          return;
        }
        showError(p.errorSlot, err && err.message ? err.message : String(err));
        p.ok.disabled = false;
        busy = false;
      }
    };
    const onCancel = () => finish(false);
    const onClose = () => finish(false);
    p.form.addEventListener("submit", onSubmit);
    p.cancel.addEventListener("click", onCancel);
    dialog.addEventListener("close", onClose);
    current = { dialog, finish };
    dialog.showModal();
    if (focus) {
      focus();
    }
  });
}

/**
 * A dialog with one text field. `options`: title and detail (strings, or strings and
 * nodes), label, value, selectEnd
 * (select the value up to this index), action(value).
 */
export function promptDialog(options) {
  const dialog = document.getElementById("prompt-dialog");
  const input = dialog.querySelector("input");
  const label = dialog.querySelector("label");
  return run(dialog, {
    title: options.title,
    detail: options.detail,
    okLabel: "OK",
    prepare() {
      label.textContent = options.label;
      input.value = options.value || "";
    },
    readValue() {
      const value = input.value.trim();
      if (!value) {
        throw `Enter a ${options.label.toLowerCase()}.`;
      }
      return value;
    },
    action: options.action,
    focus() {
      input.focus();
      const end = options.selectEnd ?? input.value.length;
      input.setSelectionRange(0, end);
    },
  });
}

/**
 * A yes/no dialog: title (its accessible name), detail, confirm label, cancel label
 * ("Cancel" when none), action().
 */
export function confirmDialog(options) {
  const dialog = document.getElementById("confirm-dialog");
  return run(dialog, {
    title: options.title,
    detail: options.detail,
    okLabel: options.confirmLabel,
    cancelLabel: options.cancelLabel,
    action: options.action,
    focus() {
      dialog.querySelector("button.cancel").focus();
    },
  });
}
