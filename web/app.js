// ferry's web client: sign-in, the project switcher, and the wiring between the Files
// panel, the Chat panel, the Nodes panel (admins) and the live event stream. Plain ES
// modules, no build step.

import {
  currentToken,
  hasToken,
  isRemembered,
  loadToken,
  onUnauthorized,
  request,
  setToken,
  takeTokenFromAddress,
  tokenFrom,
} from "./api.js";
import { createChat } from "./chat.js";
import { promptDialog } from "./dialogs.js";
import { startEvents, stopEvents } from "./events.js";
import { createFilesPanel } from "./files.js";
import { createInteractions } from "./interactions.js";
import { createSearch } from "./search.js";
import { el, shownName } from "./format.js";
import { createNodesPanel } from "./nodes.js";
import { createPreview } from "./preview.js";
import { createUploads } from "./uploads.js";

const PROJECT_KEY = "ferry.project";
/** The view shown ("nodes" or none), kept across a reload like the terminals. */
const VIEW_KEY = "ferry.view";

const signinView = document.getElementById("signin-view");
const signinForm = document.getElementById("signin-form");
const signinMessage = document.getElementById("signin-message");
const tokenInput = document.getElementById("token");
const rememberBox = document.getElementById("remember");
const appView = document.getElementById("app-view");
const projectBar = document.getElementById("project-bar");
const projectSelect = document.getElementById("project");
const newProjectButton = document.getElementById("new-project");
const signOutButton = document.getElementById("sign-out");
const viewSwitch = document.getElementById("view-switch");
const showWorkspaceButton = document.getElementById("show-workspace");
const showNodesButton = document.getElementById("show-nodes");
const nodesBadge = document.getElementById("nodes-badge");
const nodesSection = document.getElementById("nodes");

/** The project shown: null is the main workspace. */
let project = null;
let projectsLoaded = false;

const getProject = () => project;

const uploads = createUploads({
  list: document.getElementById("uploads"),
  onUploaded: (_answer, uploadedTo) => {
    if (uploadedTo === project) files.scheduleReload(50);
  },
});
const preview = createPreview({
  panels: document.getElementById("app-view"),
  onClosed: (path) => files.focusEntry(path),
});
const files = createFilesPanel({ getProject, uploads, onOpenFile: (node, inProject) => preview.open(node, inProject) });
const search = createSearch({ getProject, files });
const interactions = createInteractions({
  region: document.getElementById("interactions"),
  list: document.getElementById("interaction-list"),
  status: document.getElementById("interactions-status"),
});
const nodes = createNodesPanel({
  onAvailable(isAdmin) {
    viewSwitch.hidden = !isAdmin;
    if (!isAdmin) showView("workspace");
    else showView(sessionStorage.getItem(VIEW_KEY) === "nodes" ? "nodes" : "workspace");
  },
  onPending(count) {
    nodesBadge.hidden = count === 0;
    nodesBadge.replaceChildren(
      el("span", { "aria-hidden": "true" }, String(count)),
      el("span", { className: "visually-hidden" }, ` (${count} waiting for approval)`),
    );
  },
});
const chat = createChat({
  getProject,
  onNotice: (_notice, noticeProject) => {
    if (noticeProject === project) files.scheduleReload(150);
  },
});

// ------------------------------------------------------------------ views

/** Shows the Files and Chat panels ("workspace") or, for an admin, the Nodes panel. */
function showView(view) {
  const onNodes = view === "nodes" && !viewSwitch.hidden;
  appView.classList.toggle("nodes-view", onNodes);
  nodesSection.hidden = !onNodes;
  showWorkspaceButton.setAttribute("aria-pressed", onNodes ? "false" : "true");
  showNodesButton.setAttribute("aria-pressed", onNodes ? "true" : "false");
  if (onNodes) sessionStorage.setItem(VIEW_KEY, "nodes");
  else sessionStorage.removeItem(VIEW_KEY);
  if (onNodes) {
    preview.close();
    nodes.shown();
  }
}

showWorkspaceButton.addEventListener("click", () => showView("workspace"));
showNodesButton.addEventListener("click", () => {
  showView("nodes");
  nodes.load();
});

// ------------------------------------------------------------------ sign-in

function showSignIn(message) {
  stopEvents();
  preview.close();
  files.reset();
  search.clear();
  chat.reset();
  interactions.reset();
  nodes.reset();
  for (const dialog of document.querySelectorAll("dialog[open]")) dialog.close();
  appView.hidden = true;
  projectBar.hidden = true;
  signOutButton.hidden = true;
  signinView.hidden = false;
  if (message) {
    signinMessage.replaceChildren(el("p", { role: "alert", className: "alert" }, message));
  } else {
    signinMessage.replaceChildren();
  }
  tokenInput.value = "";
  rememberBox.checked = false;
  tokenInput.focus();
}

let signingIn = false;

onUnauthorized(() => {
  setToken(null);
  // Already on the sign-in form (a late answer to an older request): leave it as it is.
  if (!signingIn && !signinView.hidden) return;
  if (signingIn) {
    showSignIn("That token was not accepted. Check it, or make a new one with `ferry token create`.");
  } else {
    showSignIn("Your session has ended: the server no longer accepts this token. Sign in again.");
  }
});

/** Signs in with `value` (kept on this device when `remember`), replacing any session. */
function signInWith(value, remember) {
  if (!signinView.hidden) signinMessage.replaceChildren();
  else showSignIn(null);
  setToken(value, { remember });
  signingIn = true;
  start().finally(() => {
    signingIn = false;
  });
}

signinForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const typed = tokenInput.value.trim();
  // The token itself, or the whole address `ferry serve` printed.
  const value = tokenFrom(typed);
  if (!value) {
    const message = typed ? "That address holds no token: it should end in #token=…" : "Paste your token first.";
    signinMessage.replaceChildren(el("p", { role: "alert", className: "alert" }, message));
    tokenInput.focus();
    return;
  }
  signInWith(value, rememberBox.checked);
});

// Signed out in another tab of this browser: the token kept on the device is gone, and
// this tab, holding the same one, signs out too.
window.addEventListener("storage", (event) => {
  if (event.key !== "ferry.token" || event.newValue !== null) return;
  if (event.oldValue && event.oldValue === currentToken() && signinView.hidden) {
    setToken(null);
    sessionStorage.removeItem(PROJECT_KEY);
    project = null;
    showSignIn("You signed out in another tab.");
  }
});

// A changed `#token=…` (a pasted address in this tab) signs that token in.
window.addEventListener("hashchange", () => {
  const value = takeTokenFromAddress();
  if (value) signInWith(value, signinView.hidden ? isRemembered() : rememberBox.checked);
});

signOutButton.addEventListener("click", () => {
  setToken(null);
  sessionStorage.removeItem(PROJECT_KEY);
  project = null;
  showSignIn("You are signed out.");
});

// ------------------------------------------------------------------ projects

/** A project's name as the switcher shows it (its id when it has none). */
function projectName(p) {
  return typeof p.name === "string" && p.name ? p.name : p.id;
}

function fillProjects(list) {
  const fragment = document.createDocumentFragment();
  fragment.append(el("option", { value: "" }, "Main workspace"));
  // Two projects of one name are told apart by their ids.
  const counts = new Map();
  for (const p of list) counts.set(projectName(p), (counts.get(projectName(p)) || 0) + 1);
  for (const p of list) {
    const name = projectName(p);
    const shown = counts.get(name) > 1 ? `${shownName(name)} (${shownName(p.id)})` : shownName(name);
    fragment.append(el("option", { value: p.id }, shown));
  }
  projectSelect.replaceChildren(fragment);
  projectSelect.value = project ?? "";
}

/** Loads the switcher; keeps the chosen project if it still exists. */
async function loadProjects() {
  const answer = await request("GET", "/v1/projects");
  const list = (answer && Array.isArray(answer.projects) && answer.projects) || [];
  list.sort((a, b) => projectName(a).localeCompare(projectName(b)) || a.id.localeCompare(b.id));
  if (project && !list.some((p) => p.id === project)) {
    project = null;
    sessionStorage.removeItem(PROJECT_KEY);
  }
  fillProjects(list);
  projectsLoaded = true;
  return list;
}

function switchProject(next) {
  const value = next || null;
  if (value === project) return;
  project = value;
  if (project) sessionStorage.setItem(PROJECT_KEY, project);
  else sessionStorage.removeItem(PROJECT_KEY);
  projectSelect.value = project ?? "";
  preview.close();
  files.projectChanged();
  search.projectChanged();
  chat.projectChanged();
}

projectSelect.addEventListener("change", () => switchProject(projectSelect.value));

newProjectButton.addEventListener("click", () => {
  let created = null;
  promptDialog({
    title: "New project",
    label: "Project name",
    detail: "A project has its own files and conversation, beside the main workspace. Name it as you like: “Q2 Report”.",
    action: async (value) => {
      const answer = await request("POST", "/v1/projects", { json: { name: value } });
      created = (answer && answer.id) || value;
      await loadProjects();
    },
  }).then((done) => {
    if (done && created) {
      switchProject(created);
      projectSelect.focus();
    }
  });
});

// ------------------------------------------------------------------ start

function onEvent({ event, data }) {
  if (event === "files" && data) {
    const eventProject = data.project ?? null;
    if (eventProject === project) {
      files.scheduleReload(100);
    }
    // A files event without paths means the stream fell behind: reload everything.
    if (Array.isArray(data.paths) && data.paths.length === 0) interactions.refresh();
  }
  if (event === "interaction") interactions.refresh();
  // A node connected, dropped, paired or was decided on (admins only).
  if (event === "nodes") nodes.load();
}

async function start() {
  project = sessionStorage.getItem(PROJECT_KEY) || null;
  try {
    await loadProjects();
  } catch (err) {
    if (err.status === 401) return;
    projectsLoaded = false;
    fillProjects([]);
    showApp();
    files.showAlert(err.message);
    startLive();
    return;
  }
  showApp();
  files.load();
  chat.loadHistory();
  nodes.load();
  startLive();
}

function showApp() {
  signinView.hidden = true;
  signinMessage.replaceChildren();
  appView.hidden = false;
  projectBar.hidden = false;
  signOutButton.hidden = false;
}

function startLive() {
  let opened = 0;
  startEvents({
    onEvent,
    onOpen() {
      opened += 1;
      // What is pending now; later changes come as `interaction` events.
      interactions.refresh();
      // Nodes too: their changes while the stream was down came as no `nodes` event.
      if (opened > 1) nodes.load();
      // After a reconnection, catch up on whatever changed while the stream was down.
      if (opened > 1 || !projectsLoaded) {
        if (!projectsLoaded) {
          loadProjects()
            .then(() => {
              files.load();
              chat.loadHistory();
            })
            .catch(() => {});
        } else {
          files.scheduleReload(0);
        }
      }
    },
  });
}

// Files dropped outside the Files panel must not make the browser open them.
for (const type of ["dragover", "drop"]) {
  window.addEventListener(type, (event) => {
    if (event.dataTransfer && Array.from(event.dataTransfer.types).includes("Files")) {
      event.preventDefault();
    }
  });
}

loadToken();
if (hasToken()) {
  start();
} else {
  showSignIn(null);
}
