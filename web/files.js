// The Files panel: the tree of public/ (GET /v1/files), downloads, uploads by button
// and drag-and-drop, and the folder operations (mkdir, rename, move, delete).
// Files dropped on a folder row (or on a file in it) go into that folder, and each
// folder row has an "Upload into" button for the same without a mouse; the panel's own
// Upload button and a drop anywhere else upload into public/ itself.
//
// Rendering stays linear in the number of entries: rows are cloned from a prototype,
// a reload reuses the rows whose entry did not change, listeners are delegated to the
// tree, and a folder's children are built only while it is expanded (top-level folders
// start expanded, deeper ones collapsed).

import { ApiError, downloadFile, downloadFolder, request } from "./api.js";
import { confirmDialog, promptDialog } from "./dialogs.js";
import { createTrashAndShares, deleteToTrash } from "./trash_share.js";
import {
  acceptFileDrops,
  el,
  fillName,
  formatSize,
  formatTime,
  nameNode,
  parentPath,
  shownName,
  showAlertIn,
} from "./format.js";

const ROOT = "public";
const MANAGED = "public/attachments";
const DRAG_TYPE = "application/x-ferry-path";
/** Said in the rename dialog of a name with hidden characters. */
const HIDDEN_NOTE =
  "This name holds invisible or control characters, shown as ⟨U+…⟩. Edit it to a plain name, or cancel.";

/** A folder typed by the person ("reports", "/reports/", "public/reports", "") as a path. */
export function normalizeFolder(value) {
  let v = value.trim().replace(/\/+/g, "/");
  v = v.replace(/^(\.\/)+/, "").replace(/^\//, "").replace(/\/$/, "");
  if (v === "" || v === "." || v === ROOT) {
    return ROOT;
  }
  return v.startsWith(`${ROOT}/`) ? v : `${ROOT}/${v}`;
}

function jsonWithProject(body, project) {
  return project ? { ...body, project } : body;
}

export function createFilesPanel({ getProject, uploads, onOpenFile }) {
  const panel = document.getElementById("files");
  const tree = document.getElementById("tree");
  const treeWrap = document.getElementById("tree-wrap");
  const rootRow = document.getElementById("tree-root");
  const note = document.getElementById("files-note");
  const alerts = document.getElementById("files-alerts");
  const uploadButton = document.getElementById("upload-button");
  const uploadInput = document.getElementById("upload-input");
  const newFolderButton = document.getElementById("new-folder");
  const trashButton = document.getElementById("trash-button");

  /** path → listing node (with `parent` and `level` added), for the shown listing. */
  let nodes = new Map();
  let entries = [];
  let shownProject = undefined;
  /** Per project: folders the person opened or closed (otherwise isExpanded decides). */
  const expansion = new Map();
  /** The treeitem that takes Tab (roving tabindex), by path. */
  let activePath = null;

  function expansionFor(project) {
    const key = project ?? "";
    let state = expansion.get(key);
    if (!state) {
      state = { opened: new Set(), closed: new Set() };
      expansion.set(key, state);
    }
    return state;
  }

  /** Top-level folders bigger than this start collapsed (attachments/ always opens). */
  const AUTO_OPEN_MAX_CHILDREN = 200;

  function isExpanded(node) {
    const state = expansionFor(shownProject);
    if (state.opened.has(node.path)) return true;
    if (node.level !== 1 || state.closed.has(node.path)) return false;
    const count = node.children ? node.children.length : 0;
    return node.path === MANAGED || count <= AUTO_OPEN_MAX_CHILDREN;
  }

  function setExpanded(node, open) {
    const state = expansionFor(shownProject);
    if (open) {
      state.opened.add(node.path);
      state.closed.delete(node.path);
    } else {
      state.opened.delete(node.path);
      state.closed.add(node.path);
    }
  }

  // ---------------------------------------------------------------- alerts

  function showAlert(message) {
    showAlertIn(alerts, message, "Dismiss message");
  }

  function clearAlert() {
    alerts.replaceChildren();
  }

  /** Shows an API failure (a 401 is the sign-in form's business). */
  function reportError(err) {
    if (err && err.status === 401) {
      return;
    }
    console.error(err);
    showAlert(err && err.message ? err.message : String(err));
  }

  // ---------------------------------------------------------------- rendering

  function index(list, parent, level) {
    for (const node of list) {
      node.parent = parent;
      node.level = level;
      nodes.set(node.path, node);
      if (node.type === "dir" && node.children) {
        index(node.children, node, level + 1);
      }
    }
  }

  const LABELS = { upload: "Upload into", download: "Download", share: "Share", zip: "Download as zip", rename: "Rename", move: "Move", delete: "Delete" };

  /** One prototype row per kind, cloned for each entry (much cheaper than building). */
  function prototype(kind) {
    const li = document.createElement("li");
    li.setAttribute("role", "treeitem");
    li.tabIndex = -1;
    li.className = `entry entry-${kind}`;
    const row = document.createElement("div");
    row.className = "row";
    row.draggable = true;
    const name = document.createElement("span");
    // Isolated by its class (unicode-bidi: isolate): a plain element per row is cheaper
    // than a <bdi> inside it, and a name's direction cannot leak into the row either way.
    name.className = "name";
    const size = document.createElement("span");
    size.className = "size";
    const time = document.createElement("time");
    time.className = "mtime";
    row.append(name, size, time);
    const actions =
      kind === "dir"
        ? ["upload", "zip", "rename", "move", "delete"]
        : kind === "file"
          ? ["download", "share", "rename", "move", "delete"]
          : ["download", "rename", "move", "delete"];
    for (const action of actions) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = `action action-${action}`;
      button.tabIndex = -1;
      button.dataset.action = action;
      // Named by aria-label ("Delete notes.md"); the icon is CSS, the title a tooltip.
      button.title = LABELS[action];
      row.append(button);
    }
    li.append(row);
    return li;
  }

  const prototypes = { file: prototype("file"), link: prototype("link"), dir: prototype("dir") };

  // Many entries share a modification time: format each distinct one once.
  const timeCache = new Map();
  function shownTime(iso) {
    let shown = timeCache.get(iso);
    if (shown === undefined) {
      if (timeCache.size > 20000) timeCache.clear();
      shown = formatTime(iso);
      timeCache.set(iso, shown);
    }
    return shown;
  }

  /** What a row shows; a row is rebuilt only when this changes. */
  function signature(node) {
    const count = node.children ? node.children.length : 0;
    return `${node.type}\u0000${node.name}\u0000${node.size ?? ""}\u0000${node.mtime}\u0000${count}`;
  }

  function createItem(node) {
    const kind = node.type === "dir" ? "dir" : node.type === "link" ? "link" : "file";
    const li = prototypes[kind].cloneNode(true);
    const shown = shownName(node.name);
    li.setAttribute("aria-label", shown);
    li.dataset.path = node.path;
    const row = li.firstChild;
    const name = row.firstChild;
    const size = name.nextSibling;
    const time = size.nextSibling;
    fillName(name, node.name);
    name.title = shown;

    const description = [];
    if (kind === "dir") {
      const count = node.children ? node.children.length : 0;
      size.textContent = count === 1 ? "1 item" : `${count} items`;
    } else if (typeof node.size === "number") {
      size.textContent = formatSize(node.size);
    }
    if (size.textContent) description.push(size.textContent);
    const when = shownTime(node.mtime);
    if (when) {
      time.dateTime = node.mtime;
      time.textContent = when;
      description.push(`modified ${when}`);
    }

    if (node.path === MANAGED) {
      // The system's folder: marked, and no controls to rename, move or delete it.
      li.dataset.managed = "true";
      row.draggable = false;
      while (time.nextSibling) time.nextSibling.remove();
      name.after(el("span", { className: "badge badge-managed" }, "managed"));
      description.unshift("managed by the system");
    } else {
      if (node.path.startsWith(`${MANAGED}/`)) {
        // Uploads never go into attachments/ (the server refuses them too).
        const upload = row.querySelector("[data-action=upload]");
        if (upload) upload.remove();
      }
      for (let b = time.nextSibling; b; b = b.nextSibling) {
        b.setAttribute("aria-label", `${LABELS[b.dataset.action]} ${shown}`);
      }
    }
    if (kind === "link") {
      name.after(el("span", { className: "badge" }, "link"));
      description.unshift("link");
    }
    li.setAttribute("aria-description", description.join(", "));
    return li;
  }

  /** path → {li, sig} of what the tree shows, so a reload reuses unchanged rows. */
  let rendered = new Map();

  function groupOf(li) {
    const last = li.lastElementChild;
    return last && last.getAttribute("role") === "group" ? last : null;
  }

  /** Makes `container`'s items match `list`, reusing rows; records them in `next`. */
  function sync(list, container, next) {
    const items = new Array(list.length);
    for (let i = 0; i < list.length; i += 1) {
      const node = list[i];
      const sig = node.sig || (node.sig = signature(node));
      const prev = rendered.get(node.path);
      const li = prev && prev.sig === sig ? prev.li : createItem(node);
      next.set(node.path, { li, sig });
      if (node.type === "dir") {
        const open = isExpanded(node);
        const expanded = open ? "true" : "false";
        if (li.getAttribute("aria-expanded") !== expanded) li.setAttribute("aria-expanded", expanded);
        let group = groupOf(li);
        if (open) {
          if (!group) {
            group = document.createElement("ul");
            group.setAttribute("role", "group");
            li.append(group);
          }
          syncGroup(node, group, next);
        } else if (group) {
          group.remove();
        }
      }
      items[i] = li;
    }
    placeChildren(container, items);
  }

  /** Puts `items` in `container` in order, moving as few nodes as it can. */
  function placeChildren(container, items) {
    if (!container.firstElementChild) {
      const fragment = document.createDocumentFragment();
      for (const li of items) fragment.append(li);
      container.append(fragment);
      return;
    }
    const keep = new Set(items);
    for (let child = container.firstElementChild; child; ) {
      const following = child.nextElementSibling;
      if (!keep.has(child)) child.remove();
      child = following;
    }
    let ref = container.firstElementChild;
    for (const li of items) {
      if (ref === li) {
        ref = ref.nextElementSibling;
      } else {
        container.insertBefore(li, ref);
      }
    }
  }

  function syncGroup(node, group, next) {
    const children = node.children || [];
    if (children.length === 0) {
      if (!group.firstElementChild || !group.firstElementChild.classList.contains("empty-folder")) {
        group.replaceChildren(el("li", { className: "empty-folder", role: "none" }, "Empty folder"));
      }
      return;
    }
    sync(children, group, next);
  }

  function render(listing, project) {
    const focus = rememberFocus();
    if (project !== shownProject) {
      rendered = new Map();
      tree.replaceChildren();
    }
    shownProject = project;
    nodes = new Map();
    entries = listing.entries || [];
    index(entries, null, 1);
    const next = new Map();
    sync(entries, tree, next);
    rendered = next;

    if (activePath !== null && !nodes.has(activePath)) {
      activePath = focus && focus.fallback && nodes.has(focus.fallback) ? focus.fallback : null;
    }
    const activeItem = (activePath && itemFor(activePath)) || tree.querySelector("[role=treeitem]");
    if (activeItem) setActive(activeItem);

    const attachments = nodes.get(MANAGED);
    const onlyAttachments = entries.length === 1 && attachments && !(attachments.children || []).length;
    const notes = [];
    if (listing.truncated) {
      notes.push("The listing is truncated: this folder tree is too large to list completely, so some entries are not shown.");
    }
    if (entries.length === 0 || onlyAttachments) {
      notes.push("No files yet. Upload files, or drop them here.");
    }
    note.textContent = notes.join(" ");
    note.hidden = notes.length === 0;
    note.classList.toggle("note-warning", Boolean(listing.truncated));
    restoreFocus(focus);
  }

  /** Where the keyboard focus is in the tree, to put it back after a re-render. */
  function rememberFocus() {
    const active = document.activeElement;
    if (!active || !tree.contains(active)) {
      return null;
    }
    const item = active.closest("[role=treeitem]");
    if (!item) {
      return null;
    }
    const path = item.dataset.path;
    // If the entry goes away, fall back to the entry before it (or its folder).
    const all = visibleItems();
    const i = all.indexOf(item);
    const fallback = i > 0 ? all[i - 1].dataset.path : parentPath(path);
    return { path, action: active.dataset.action || null, fallback };
  }

  function restoreFocus(focus) {
    if (!focus || tree.contains(document.activeElement)) {
      return;
    }
    const path = nodes.has(focus.path) ? focus.path : activePath;
    const item = path ? itemFor(path) : null;
    if (!item) {
      return;
    }
    const target = (focus.action && item.querySelector(`:scope > .row [data-action=${focus.action}]`)) || item;
    setActive(item);
    target.focus({ preventScroll: false });
  }

  function itemFor(path) {
    const r = rendered.get(path);
    return r && r.li.isConnected && tree.contains(r.li) ? r.li : null;
  }

  function visibleItems() {
    return Array.from(tree.querySelectorAll("[role=treeitem]"));
  }

  /** Makes `item` the tree's tab stop; its buttons join the tab order. */
  function setActive(item) {
    const previous = tree.querySelector("[role=treeitem][tabindex='0']");
    if (previous && previous !== item) {
      previous.tabIndex = -1;
      for (const b of previous.querySelectorAll(":scope > .row button")) b.tabIndex = -1;
    }
    item.tabIndex = 0;
    for (const b of item.querySelectorAll(":scope > .row button")) b.tabIndex = 0;
    activePath = item.dataset.path;
  }

  function toggle(item, open) {
    const node = nodes.get(item.dataset.path);
    if (!node || node.type !== "dir") {
      return;
    }
    const isOpen = item.getAttribute("aria-expanded") === "true";
    const want = open === undefined ? !isOpen : open;
    if (want === isOpen) {
      return;
    }
    setExpanded(node, want);
    item.setAttribute("aria-expanded", want ? "true" : "false");
    if (want) {
      const group = document.createElement("ul");
      group.setAttribute("role", "group");
      item.append(group);
      syncGroup(node, group, rendered);
    } else {
      const group = item.querySelector(":scope > [role=group]");
      if (group) {
        if (group.contains(document.activeElement)) {
          setActive(item);
          item.focus();
        }
        group.remove();
      }
    }
  }

  // ---------------------------------------------------------------- loading

  let loading = null;
  let again = false;
  let reloadTimer = null;

  function setBusy(busy) {
    panel.setAttribute("aria-busy", busy ? "true" : "false");
  }

  /** Fetches and shows the listing of the current project; coalesces overlapping calls. */
  function load() {
    if (loading) {
      again = true;
      return loading;
    }
    loading = (async () => {
      do {
        again = false;
        const project = getProject();
        setBusy(true);
        try {
          const listing = await request("GET", "/v1/files", { query: { project } });
          if (project !== getProject()) {
            again = true;
            continue;
          }
          render(listing, project);
        } catch (err) {
          if (err.status === 401) {
            break;
          }
          if (project === getProject()) {
            reportError(err);
          }
        } finally {
          setBusy(false);
        }
      } while (again);
      loading = null;
    })();
    return loading;
  }

  /** A reload soon, once per burst of events. */
  function scheduleReload(delay = 100) {
    clearTimeout(reloadTimer);
    reloadTimer = setTimeout(() => {
      reloadTimer = null;
      load();
    }, delay);
  }

  /** Shows the project switched to: empty tree, then its listing. */
  function projectChanged() {
    clearAlert();
    activePath = null;
    rendered = new Map();
    tree.replaceChildren();
    note.hidden = true;
    load();
  }

  function reset() {
    clearTimeout(reloadTimer);
    tree.replaceChildren();
    note.hidden = true;
    clearAlert();
    nodes = new Map();
    rendered = new Map();
    activePath = null;
    shownProject = undefined;
  }

  // ---------------------------------------------------------------- operations

  async function move(from, to, project) {
    await request("POST", "/v1/files/move", { json: jsonWithProject({ from, to }, project) });
  }

  /** A file row activated: previewed when a preview is wired in, else downloaded. */
  function activate(node) {
    if (onOpenFile && node.type === "file") onOpenFile(node, getProject());
    else download(node);
  }

  function download(node) {
    const project = getProject();
    downloadFile(node.path, project).catch(reportError);
  }

  function rename(node) {
    const project = getProject();
    // The field shows the name as shown everywhere else (markers for hidden characters).
    const shown = shownName(node.name);
    const dot = shown.lastIndexOf(".");
    promptDialog({
      title: ["Rename ", nameNode(node.name)],
      label: "New name",
      value: shown,
      detail: shown === node.name ? "" : HIDDEN_NOTE,
      selectEnd: node.type !== "dir" && dot > 0 ? dot : shown.length,
      action: async (value) => {
        if (value === shown) {
          return;
        }
        if (value.includes("/")) {
          throw new ApiError(400, "unsafe_name", "A name cannot contain “/”. To put it in another folder, use Move.");
        }
        const to = `${parentPath(node.path)}/${value}`;
        await move(node.path, to, project);
        activePath = to;
      },
    }).then((done) => {
      if (done) {
        clearAlert();
        focusAfterLoad(activePath);
      }
    });
  }

  function moveDialog(node) {
    const project = getProject();
    let target = null;
    const from = shownName(parentPath(node.path));
    promptDialog({
      title: ["Move ", nameNode(node.name)],
      label: "Move to folder",
      value: from,
      detail: "The folder to move it into, such as public/reports (public is the top level).",
      action: async (value) => {
        // Unchanged: the folder it is in (whose shown form may differ from its name).
        const folder = value === from ? parentPath(node.path) : normalizeFolder(value);
        const to = `${folder}/${node.name}`;
        if (to === node.path) {
          return;
        }
        await move(node.path, to, project);
        target = to;
      },
    }).then((done) => {
      if (done && target) {
        clearAlert();
        // Open the destination so the moved entry shows.
        const folder = parentPath(target);
        openPathTo(folder);
        activePath = target;
        focusAfterLoad(target);
      }
    });
  }

  function remove(node) {
    const project = getProject();
    const isDir = node.type === "dir";
    let trashId = null;
    confirmDialog({
      title: ["Delete ", nameNode(node.name), "?"],
      detail: isDir
        ? ["The folder ", nameNode(node.path), " and everything in it will be moved to the trash."]
        : [nameNode(node.path), " will be moved to the trash."],
      confirmLabel: "Delete",
      action: async () => {
        trashId = await deleteToTrash(node.path, project);
      },
    }).then((done) => {
      if (done) {
        clearAlert();
        if (trashId) extras.showTrashed(node.path, trashId);
        const item = itemFor(node.path);
        const all = visibleItems();
        const i = item ? all.indexOf(item) : -1;
        const next = i > 0 ? all[i - 1].dataset.path : parentPath(node.path);
        activePath = nodes.has(next) ? next : null;
        focusAfterLoad(activePath);
      }
    });
  }

  function newFolder() {
    const project = getProject();
    let made = null;
    promptDialog({
      title: "New folder",
      label: "Folder name",
      value: "",
      action: async (value) => {
        const path = normalizeFolder(value);
        if (path === ROOT) {
          throw new ApiError(400, "bad_path", "Enter a name for the new folder.");
        }
        const answer = await request("POST", "/v1/files/mkdir", {
          json: jsonWithProject({ path }, project),
        });
        made = (answer && answer.path) || path;
      },
    }).then((done) => {
      if (done && made) {
        clearAlert();
        openPathTo(parentPath(made));
        activePath = made;
        focusAfterLoad(made);
      }
    });
  }

  /** Expands every folder on the way to `folder` (inclusive) for the next render. */
  function openPathTo(folder) {
    const parts = folder.split("/");
    for (let i = 2; i <= parts.length; i += 1) {
      const path = parts.slice(0, i).join("/");
      const level = i - 1;
      setExpanded({ path, level }, true);
    }
  }

  /** Reloads now and puts the focus on `path` (or the tree) afterwards. */
  async function focusAfterLoad(path) {
    await load();
    const item = path ? itemFor(path) : null;
    const target = item || tree.querySelector("[role=treeitem]");
    if (target) {
      setActive(target);
      target.focus();
    }
  }

  async function moveByDrag(from, folder) {
    const node = nodes.get(from);
    if (!node) {
      return;
    }
    const to = `${folder}/${node.name}`;
    if (to === from || folder === from || folder.startsWith(`${from}/`)) {
      return;
    }
    try {
      await move(from, to, getProject());
      clearAlert();
      openPathTo(folder);
      activePath = to;
    } catch (err) {
      reportError(err);
    }
    load();
  }

  // ---------------------------------------------------------------- events

  tree.addEventListener("click", (event) => {
    const item = event.target.closest("[role=treeitem]");
    if (!item || !tree.contains(item)) {
      return;
    }
    const node = nodes.get(item.dataset.path);
    if (!node) {
      return;
    }
    const button = event.target.closest("button[data-action]");
    setActive(item);
    if (button) {
      const action = button.dataset.action;
      if (action === "upload") uploadInto(node.path);
      else if (action === "download") download(node);
      else if (action === "share") extras.openShare(node, getProject());
      else if (action === "zip") downloadFolder(node.path, getProject()).catch(reportError);
      else if (action === "rename") rename(node);
      else if (action === "move") moveDialog(node);
      else if (action === "delete") remove(node);
      return;
    }
    if (!event.target.closest(".row")) {
      return;
    }
    item.focus();
    if (node.type === "dir") {
      toggle(item);
    } else {
      activate(node);
    }
  });

  tree.addEventListener("focusin", (event) => {
    const item = event.target.closest("[role=treeitem]");
    if (item && item.tabIndex !== 0) {
      setActive(item);
    }
  });

  tree.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey) {
      return;
    }
    const item = event.target.closest("[role=treeitem]");
    if (!item) {
      return;
    }
    // Keys on a button are the button's (Enter/Space press it).
    if (event.target !== item) {
      return;
    }
    const node = nodes.get(item.dataset.path);
    const isDir = node && node.type === "dir";
    const open = item.getAttribute("aria-expanded") === "true";
    const focusItem = (target) => {
      if (target) {
        setActive(target);
        target.focus();
      }
    };
    let handled = true;
    switch (event.key) {
      case "ArrowDown": {
        const all = visibleItems();
        focusItem(all[all.indexOf(item) + 1]);
        break;
      }
      case "ArrowUp": {
        const all = visibleItems();
        focusItem(all[all.indexOf(item) - 1]);
        break;
      }
      case "Home":
        focusItem(tree.querySelector("[role=treeitem]"));
        break;
      case "End": {
        const all = visibleItems();
        focusItem(all[all.length - 1]);
        break;
      }
      case "ArrowRight":
        if (isDir && !open) toggle(item, true);
        else if (isDir) focusItem(item.querySelector(":scope > [role=group] > [role=treeitem]"));
        break;
      case "ArrowLeft":
        if (isDir && open) toggle(item, false);
        else focusItem(item.parentElement.closest("[role=treeitem]"));
        break;
      case "Enter":
      case " ":
        if (isDir) toggle(item);
        else if (node) activate(node);
        break;
      case "F2":
        if (node && node.path !== MANAGED) rename(node);
        break;
      case "Delete":
        if (node && node.path !== MANAGED) remove(node);
        break;
      default:
        handled = false;
    }
    if (handled) {
      event.preventDefault();
    }
  });

  // Drag an entry onto a folder (or the public root) to move it.
  let dragFrom = null;

  tree.addEventListener("dragstart", (event) => {
    const item = event.target.closest && event.target.closest("[role=treeitem]");
    if (!item || item.dataset.path === MANAGED) {
      event.preventDefault();
      return;
    }
    dragFrom = item.dataset.path;
    event.dataTransfer.setData(DRAG_TYPE, dragFrom);
    event.dataTransfer.setData("text/plain", dragFrom);
    event.dataTransfer.effectAllowed = "move";
    item.classList.add("dragging");
  });

  tree.addEventListener("dragend", (event) => {
    const item = event.target.closest && event.target.closest("[role=treeitem]");
    if (item) item.classList.remove("dragging");
    dragFrom = null;
    clearDropTarget();
  });

  let dropTarget = null;
  function clearDropTarget() {
    if (dropTarget) {
      dropTarget.classList.remove("drop-target");
      dropTarget = null;
    }
  }

  /** The folder an internal drag is over: a folder row, a file's folder, or the root. */
  function dropFolderAt(target) {
    if (rootRow.contains(target)) {
      return { path: ROOT, element: rootRow };
    }
    const item = target.closest && target.closest("[role=treeitem]");
    if (!item || !tree.contains(item)) {
      return { path: ROOT, element: rootRow };
    }
    const node = nodes.get(item.dataset.path);
    if (node && node.type === "dir") {
      return { path: node.path, element: item.querySelector(":scope > .row") };
    }
    const parentItem = item.parentElement.closest("[role=treeitem]");
    if (parentItem) {
      return { path: parentItem.dataset.path, element: parentItem.querySelector(":scope > .row") };
    }
    return { path: ROOT, element: rootRow };
  }

  function isInternalDrag(event) {
    return Array.from(event.dataTransfer.types).includes(DRAG_TYPE);
  }

  treeWrap.addEventListener("dragover", (event) => {
    if (!isInternalDrag(event)) {
      return;
    }
    const { path, element } = dropFolderAt(event.target);
    const from = dragFrom;
    if (from && (path === from || path.startsWith(`${from}/`) || path === parentPath(from))) {
      clearDropTarget();
      event.dataTransfer.dropEffect = "none";
      return;
    }
    event.preventDefault();
    event.dataTransfer.dropEffect = "move";
    if (dropTarget !== element) {
      clearDropTarget();
      dropTarget = element;
      dropTarget.classList.add("drop-target");
    }
  });

  treeWrap.addEventListener("dragleave", (event) => {
    if (!treeWrap.contains(event.relatedTarget)) {
      clearDropTarget();
    }
  });

  treeWrap.addEventListener("drop", (event) => {
    if (!isInternalDrag(event)) {
      return;
    }
    event.preventDefault();
    event.stopPropagation();
    const from = event.dataTransfer.getData(DRAG_TYPE);
    const { path } = dropFolderAt(event.target);
    clearDropTarget();
    if (from) {
      moveByDrag(from, path);
    }
  });

  /** Whether files may be uploaded into `path`: not attachments/, which the system fills. */
  function takesUploads(path) {
    return path !== MANAGED && !path.startsWith(`${MANAGED}/`);
  }

  function hasFiles(event) {
    return Array.from(event.dataTransfer.types).includes("Files");
  }

  // Files from the computer dropped on a folder row (or a file in a folder) go into
  // that folder; the row is highlighted while they are over it. Anywhere else on the
  // panel, they go into public/ (acceptFileDrops below).
  treeWrap.addEventListener("dragover", (event) => {
    if (!hasFiles(event)) return;
    const { path, element } = dropFolderAt(event.target);
    if (path === ROOT) {
      clearDropTarget();
      return;
    }
    // Handled here: the panel's own handler would take the drop for public/.
    event.stopPropagation();
    panel.classList.remove("drop-active");
    if (!takesUploads(path)) {
      clearDropTarget();
      event.dataTransfer.dropEffect = "none";
      return;
    }
    event.preventDefault();
    event.dataTransfer.dropEffect = "copy";
    if (dropTarget !== element) {
      clearDropTarget();
      dropTarget = element;
      dropTarget.classList.add("drop-target");
    }
  });

  treeWrap.addEventListener("drop", (event) => {
    if (!hasFiles(event)) return;
    const { path } = dropFolderAt(event.target);
    if (path === ROOT) {
      clearDropTarget();
      return;
    }
    event.preventDefault();
    event.stopPropagation();
    clearDropTarget();
    panel.classList.remove("drop-active");
    const files = Array.from(event.dataTransfer.files || []);
    if (files.length && takesUploads(path)) {
      uploads.startAll(files, getProject(), path);
    }
  });

  // Drop files from the computer anywhere else on the panel to upload them.
  acceptFileDrops(panel, (files) => uploads.startAll(files, getProject()));

  /** Where the chosen files go: null for public/ itself, else a folder's path. */
  let uploadFolder = null;

  /** Opens the file chooser for an upload into the folder `path`. */
  function uploadInto(path) {
    uploadFolder = path;
    uploadInput.click();
  }

  uploadButton.addEventListener("click", () => {
    uploadFolder = null;
    uploadInput.click();
  });
  uploadInput.addEventListener("change", () => {
    const files = Array.from(uploadInput.files || []);
    const folder = uploadFolder;
    uploadFolder = null;
    uploadInput.value = "";
    if (files.length) {
      uploads.startAll(files, getProject(), folder);
    }
  });
  newFolderButton.addEventListener("click", newFolder);

  // The trash (a delete's Undo, the Trash view) and share links: trash_share.js.
  const extras = createTrashAndShares({
    alerts,
    reload: (path) => {
      openPathTo(parentPath(path));
      activePath = path;
      load();
    },
  });
  trashButton.addEventListener("click", () => extras.openTrash());

  /** Shows `path` in the tree: its folders opened, its row focused (M-DAILY search). */
  function reveal(path) {
    openPathTo(parentPath(path));
    activePath = path;
    return focusAfterLoad(path);
  }

  /** Puts the focus back on the row of `path`, when it is still shown. */
  function focusEntry(path) {
    const item = itemFor(path);
    if (item) {
      setActive(item);
      item.focus();
    }
  }

  return {
    load,
    reveal,
    focusEntry,
    scheduleReload,
    projectChanged,
    reset,
    showAlert,
    get shownProject() {
      return shownProject;
    },
  };
}
