// The Chat panel: the saved conversation (GET /v1/chat/history, newest page first, older
// pages on request), the composer with attachments (uploaded first through POST
// /v1/media, then named in the message), and the streamed reply of POST /v1/chat (delta,
// notice, error, done), which Stop ends: the gateway then cancels the agent's turn and
// keeps what came so far. The agent's words are Markdown, rendered safely (markdown.js)
// and rendered again as a streamed reply grows, at most every RENDER_INTERVAL_MS. "New
// conversation" (POST /v1/chat/new) archives the conversation: the agent no longer
// sees it, and the panel starts empty.

import { ApiError, downloadFile, parseJson, readEvents, request, uploadFile } from "./api.js";
import { acceptFileDrops, baseName, el, formatChatTime, nameNode, shownName, showAlertIn } from "./format.js";
import { renderMarkdown } from "./markdown.js";

/**
 * How often a streamed reply's Markdown is rendered again while it grows, at most; a
 * long reply whose rendering takes longer waits RENDER_COST_FACTOR times that, so the
 * page spends at most about a fifth of its time rendering however long the reply.
 */
const RENDER_INTERVAL_MS = 80;
const RENDER_COST_FACTOR = 4;

export function createChat({ getProject, onNotice }) {
  const log = document.getElementById("conversation");
  const alerts = document.getElementById("chat-alerts");
  const form = document.getElementById("composer");
  const textarea = document.getElementById("message");
  const chipList = document.getElementById("chips");
  const attachButton = document.getElementById("attach-button");
  const attachInput = document.getElementById("attach-input");
  const sendButton = document.getElementById("send-button");
  const stopButton = document.getElementById("stop-button");
  const newConversationButton = document.getElementById("new-conversation");

  /** Files chosen for the next message: `{file, path, item, progress}`. */
  let chips = [];
  let busy = false;
  /** Aborts the reply being streamed (on a project switch or sign-out). */
  let streamController = null;
  /** Set when the person pressed Stop, so the aborted read is not taken for a failure. */
  let stopRequested = false;
  let historySeq = 0;
  /** The `earlier` cursor of the oldest page shown; null when it is the oldest. */
  let earlier = null;

  // ---------------------------------------------------------------- alerts

  function showAlert(message) {
    showAlertIn(alerts, message, "Dismiss chat message");
  }

  function clearAlerts() {
    alerts.replaceChildren();
  }

  // ---------------------------------------------------------------- messages

  function nearBottom() {
    return log.scrollHeight - log.scrollTop - log.clientHeight < 48;
  }

  function scrollToEnd() {
    log.scrollTop = log.scrollHeight;
  }

  function removeHint() {
    const hint = log.querySelector(".chat-hint");
    if (hint) hint.remove();
  }

  function showHint() {
    if (!log.querySelector("article")) {
      log.replaceChildren(
        el(
          "p",
          { className: "chat-hint" },
          "Ask your agent for something. Files it delivers show up under its reply, and stay in the Files panel.",
        ),
      );
    }
  }

  /**
   * An `<article data-role=…>` with the text and attachments: the member's words as
   * text, never markup; the agent's as safe Markdown. `setText` shows another text (a
   * reply as it grows), `text()` is what is shown.
   */
  function messageElement(role, text, attachments, time) {
    const markdown = role !== "user";
    const body = el("div", { className: markdown ? "message-text message-markdown" : "message-text" });
    let shown = "";
    const setText = (value) => {
      shown = value || "";
      if (markdown) body.replaceChildren(renderMarkdown(shown));
      else body.replaceChildren(document.createTextNode(shown));
    };
    setText(text);
    const article = el(
      "article",
      {
        className: `message message-${role}`,
        "data-role": role,
        "aria-label": role === "user" ? "You" : "Agent",
      },
      body,
    );
    if (time) {
      const shown = formatChatTime(time);
      if (shown) article.title = shown;
    }
    if (attachments && attachments.length) {
      const list = el("ul", { className: "message-attachments", "aria-label": "Attached files" });
      for (const path of attachments) {
        list.append(
          el(
            "li",
            { className: "attachment", title: shownName(path) },
            el("span", { className: "icon icon-clip", "aria-hidden": "true" }),
            nameNode(baseName(path)),
          ),
        );
      }
      article.append(list);
    }
    return { article, setText, text: () => shown };
  }

  function append(role, text, attachments, time) {
    removeHint();
    const stick = nearBottom();
    const made = messageElement(role, text, attachments, time);
    log.append(made.article);
    if (stick || role === "user") scrollToEnd();
    return made;
  }

  function addNotice(article, notice, project) {
    let box = article.querySelector(".notices");
    if (!box) {
      box = el("div", { className: "notices" });
      article.append(box);
    }
    const path = typeof notice.path === "string" && notice.path ? notice.path : null;
    // Built from the path, the name and the path each isolated and shown with their
    // hidden characters visible: a name cannot reorder the line or start another one.
    const content = path
      ? ["📎 ", nameNode(baseName(path)), " — ", nameNode(path)]
      : [nameNode(typeof notice.text === "string" && notice.text ? notice.text : "📎 file", "shown-text")];
    const button = el(
      "button",
      { type: "button", className: "notice", title: path ? `Download ${shownName(path)}` : "" },
      ...content,
    );
    if (path) {
      button.addEventListener("click", () => {
        downloadFile(path, project).catch((err) => {
          if (err.status !== 401) showAlert(err.message);
        });
      });
    } else {
      button.disabled = true;
    }
    box.append(button);
  }

  function addReplyError(article, message) {
    article.append(el("p", { role: "alert", className: "alert reply-error" }, message));
  }

  // ---------------------------------------------------------------- history

  /** One page of the saved conversation, older than `before` (the newest when null). */
  async function fetchPage(before) {
    const query = { project: getProject() };
    if (before !== null) query.before = String(before);
    const answer = await request("GET", "/v1/chat/history", { query });
    return {
      messages: (answer && Array.isArray(answer.messages) && answer.messages) || [],
      earlier: answer && Number.isInteger(answer.earlier) ? answer.earlier : null,
    };
  }

  function pageFragment(messages) {
    const fragment = document.createDocumentFragment();
    for (const m of messages) {
      const role = m.role === "user" ? "user" : "assistant";
      fragment.append(messageElement(role, String(m.text ?? ""), m.attachments, m.time).article);
    }
    return fragment;
  }

  const earlierButton = el("button", { type: "button", className: "button load-earlier" }, "Load earlier messages");
  earlierButton.addEventListener("click", () => loadEarlier());

  /** Shows "Load earlier messages" above the conversation while older pages exist. */
  function placeEarlierButton() {
    if (earlier === null) earlierButton.remove();
    else if (log.firstChild !== earlierButton) log.prepend(earlierButton);
  }

  /** The newest page of the conversation: the last turns first. */
  async function loadHistory() {
    const seq = ++historySeq;
    let page;
    try {
      page = await fetchPage(null);
    } catch (err) {
      if (seq !== historySeq || err.status === 401) return;
      if (err.status === 404 && err.code === "no_route") {
        showHint();
        return;
      }
      showAlert(`The conversation could not be loaded: ${err.message}`);
      return;
    }
    if (seq !== historySeq) return;
    removeHint();
    // Messages sent while the history was on its way stay after it.
    log.prepend(pageFragment(page.messages));
    earlier = page.earlier;
    placeEarlierButton();
    showHint();
    scrollToEnd();
  }

  /** The page before the oldest shown, above it, keeping what is in view in place. */
  async function loadEarlier() {
    if (earlier === null) return;
    const seq = historySeq;
    earlierButton.disabled = true;
    let page;
    try {
      page = await fetchPage(earlier);
    } catch (err) {
      if (seq === historySeq && err.status !== 401) {
        showAlert(`Earlier messages could not be loaded: ${err.message}`);
      }
      return;
    } finally {
      earlierButton.disabled = false;
    }
    if (seq !== historySeq) return;
    const fromBottom = log.scrollHeight - log.scrollTop;
    const hadFocus = document.activeElement === earlierButton;
    earlierButton.after(pageFragment(page.messages));
    earlier = page.earlier;
    placeEarlierButton();
    log.scrollTop = log.scrollHeight - fromBottom;
    // The button goes with the oldest page: keep the keyboard in the conversation.
    if (hadFocus && earlier === null) log.focus();
  }

  // ---------------------------------------------------------------- composer

  function setBusy(value) {
    busy = value;
    const hadFocus = form.contains(document.activeElement);
    textarea.disabled = value;
    sendButton.disabled = value;
    attachButton.disabled = value;
    form.setAttribute("aria-busy", value ? "true" : "false");
    for (const chip of chips) {
      chip.remove.disabled = value;
    }
    if (!value && (hadFocus || document.activeElement === document.body)) {
      textarea.focus();
    }
  }

  function addChip(file) {
    const progress = el("progress", { max: 1, value: 0, hidden: true, "aria-label": `Upload progress of ${shownName(file.name)}` });
    const remove = el("button", {
      type: "button",
      className: "icon-button chip-remove",
      "aria-label": `Remove attachment ${shownName(file.name)}`,
      title: "Remove",
    });
    remove.append(el("span", { className: "icon icon-close", "aria-hidden": "true" }));
    const item = el(
      "li",
      { className: "chip" },
      el("span", { className: "chip-name", title: shownName(file.name) }, nameNode(file.name)),
      progress,
      remove,
    );
    const chip = { file, path: null, project: undefined, item, progress, remove };
    remove.addEventListener("click", () => {
      chips = chips.filter((c) => c !== chip);
      item.remove();
      chipList.hidden = chips.length === 0;
      textarea.focus();
    });
    chips.push(chip);
    chipList.append(item);
    chipList.hidden = false;
  }

  function clearChips() {
    chips = [];
    chipList.replaceChildren();
    chipList.hidden = true;
  }

  /** Uploads the chips not yet uploaded into `project`; throws the first failure. */
  async function uploadChips(project) {
    const pending = chips.filter((c) => !(c.path && c.project === project));
    const results = await Promise.allSettled(
      pending.map((chip) => {
        chip.item.classList.remove("chip-failed");
        chip.progress.hidden = false;
        chip.progress.value = 0;
        const upload = uploadFile(chip.file, project, (f) => {
          chip.progress.value = f;
        });
        return upload.promise.then((answer) => {
          chip.path = answer.path;
          chip.project = project;
          chip.progress.value = 1;
          chip.item.classList.add("chip-done");
          return answer;
        });
      }),
    );
    const failures = [];
    results.forEach((r, i) => {
      if (r.status === "rejected") {
        pending[i].item.classList.add("chip-failed");
        pending[i].progress.hidden = true;
        failures.push({ chip: pending[i], err: r.reason });
      }
    });
    if (failures.length) {
      const { err } = failures[0];
      throw err instanceof ApiError ? err : new ApiError(0, "upload", String(err));
    }
  }

  async function send() {
    if (busy) return;
    const text = textarea.value;
    if (!text.trim()) {
      if (chips.length) showAlert("Write a message to go with the files.");
      textarea.focus();
      return;
    }
    clearAlerts();
    setBusy(true);
    const project = getProject();

    try {
      await uploadChips(project);
    } catch (err) {
      setBusy(false);
      if (err.status !== 401) showAlert(err.message);
      return;
    }

    if (project !== getProject()) {
      // The project changed while the files went up: send nothing to the old one.
      setBusy(false);
      return;
    }
    const attachments = chips.map((c) => c.path);
    const body = { message: text };
    if (project) body.project = project;
    if (attachments.length) body.attachments = attachments;

    const mine = append("user", text, attachments, new Date().toISOString());
    const controller = new AbortController();
    streamController = controller;
    stopRequested = false;
    let response;
    try {
      response = await request("POST", "/v1/chat", {
        json: body,
        raw: true,
        signal: controller.signal,
        headers: { Accept: "text/event-stream" },
      });
    } catch (err) {
      mine.article.remove();
      showHint();
      if (streamController === controller) streamController = null;
      if (err.name === "AbortError") return;
      setBusy(false);
      if (err.status !== 401) showAlert(err.message);
      return;
    }

    textarea.value = "";
    clearChips();
    const reply = append("assistant", "");
    reply.article.setAttribute("aria-busy", "true");
    // The reply as it came, rendered again at most every RENDER_INTERVAL_MS.
    let said = "";
    let renderTimer = null;
    let renderDelay = RENDER_INTERVAL_MS;
    const render = () => {
      clearTimeout(renderTimer);
      renderTimer = null;
      const stick = nearBottom();
      const started = performance.now();
      reply.setText(said);
      renderDelay = Math.max(RENDER_INTERVAL_MS, RENDER_COST_FACTOR * (performance.now() - started));
      if (stick) scrollToEnd();
    };
    stopButton.hidden = false;
    let finished = false;
    let failed = false;
    try {
      for await (const { event, data } of readEvents(response.body)) {
        const payload = parseJson(data) || {};
        if (event === "delta") {
          if (typeof payload.text === "string" && payload.text) {
            said += payload.text;
            if (renderTimer === null) renderTimer = setTimeout(render, renderDelay);
          }
        } else if (event === "notice") {
          addNotice(reply.article, payload, project);
          if (onNotice) onNotice(payload, project);
          scrollToEnd();
        } else if (event === "error") {
          failed = true;
          addReplyError(reply.article, payload.message || "The agent failed to answer.");
          scrollToEnd();
        } else if (event === "done") {
          finished = true;
          break;
        }
      }
    } catch (err) {
      if (err && err.name === "AbortError" && !stopRequested) {
        return;
      }
      if (stopRequested) {
        reply.article.append(el("p", { className: "reply-stopped" }, "Stopped."));
      } else if (!failed) {
        addReplyError(reply.article, "The connection dropped before the reply was complete.");
        failed = true;
      }
    } finally {
      render();
      reply.article.removeAttribute("aria-busy");
      if (streamController === controller) {
        streamController = null;
        stopButton.hidden = true;
      }
    }
    if (controller.signal.aborted && !stopRequested) return;
    if (!finished && !failed && !stopRequested) {
      addReplyError(reply.article, "The reply ended before it was complete.");
    }
    if (!said && !reply.article.querySelector(".notices, .reply-error, .reply-stopped")) {
      reply.setText("(no reply)");
    }
    setBusy(false);
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });

  textarea.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && !event.altKey) {
      event.preventDefault();
      send();
    }
  });

  // Files dropped on the Chat panel are attached to the next message.
  const panel = document.getElementById("chat");
  acceptFileDrops(
    panel,
    (files) => {
      for (const file of files) addChip(file);
      textarea.focus();
    },
    () => !busy,
  );

  attachButton.addEventListener("click", () => attachInput.click());
  attachInput.addEventListener("change", () => {
    for (const file of Array.from(attachInput.files || [])) {
      addChip(file);
    }
    attachInput.value = "";
    textarea.focus();
  });

  // Stop: aborting the fetch closes the connection, and the gateway cancels the turn.
  stopButton.addEventListener("click", () => {
    if (!streamController) return;
    stopRequested = true;
    streamController.abort();
  });

  // New conversation: the reply on its way (if any) is stopped, the server archives the
  // conversation, and the panel starts empty.
  newConversationButton.addEventListener("click", async () => {
    const project = getProject();
    if (streamController) {
      stopRequested = true;
      streamController.abort();
    }
    newConversationButton.disabled = true;
    clearAlerts();
    try {
      await request("POST", "/v1/chat/new", { json: project ? { project } : {} });
    } catch (err) {
      if (err.status !== 401) showAlert(`A new conversation could not be started: ${err.message}`);
      return;
    } finally {
      newConversationButton.disabled = false;
    }
    if (project !== getProject()) return;
    historySeq += 1;
    earlier = null;
    log.replaceChildren();
    showHint();
    if (busy) setBusy(false);
    textarea.focus();
  });

  function abortStream() {
    if (streamController) {
      streamController.abort();
      streamController = null;
    }
    stopButton.hidden = true;
    if (busy) setBusy(false);
  }

  /** Shows the conversation of the project switched to. */
  function projectChanged() {
    abortStream();
    clearAlerts();
    log.replaceChildren();
    earlier = null;
    // Uploaded attachments belong to the old project: upload again on send.
    for (const chip of chips) {
      chip.item.classList.remove("chip-done", "chip-failed");
      chip.progress.hidden = true;
    }
    loadHistory();
  }

  function reset() {
    abortStream();
    historySeq += 1;
    earlier = null;
    clearAlerts();
    clearChips();
    log.replaceChildren();
  }

  clearChips();
  return { loadHistory, projectChanged, reset };
}
