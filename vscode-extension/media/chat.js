// The Apprentice chat webview: renders what the extension posts (messages, steps, edit cards)
// and posts the person's actions back. Plain browser JS under a strict CSP (no inline code);
// every server-provided string goes through textContent, never innerHTML.
// DOM contract (the end-to-end test depends on it): body[data-ready] once the handlers are
// attached (before that a click does nothing), textarea#prompt, button#send,
// button#new-session, div#messages holding .msg.user / .msg.assistant / .msg.step /
// .msg.summary / .msg.done / .msg.error and div.edit-card[data-suggestion-id] (which may hold
// a div.notice, e.g. when the file changed since the agent read it).
(function () {
  "use strict";
  const vscode = acquireVsCodeApi();
  const messages = document.getElementById("messages");
  const prompt = document.getElementById("prompt");
  const sendButton = document.getElementById("send");
  const cancelButton = document.getElementById("cancel");
  const newSessionButton = document.getElementById("new-session");
  const connection = document.getElementById("connection");

  // The assistant bubble that streamed deltas append to; closed by any other message.
  let openAssistant = null;

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function scrollToEnd() {
    messages.scrollTop = messages.scrollHeight;
  }

  function append(node) {
    messages.appendChild(node);
    scrollToEnd();
    return node;
  }

  // The model streams its action as JSON ({thought, tool, args}); once the bubble is complete,
  // show the thought and a one-line summary of the action instead of the raw JSON.
  function closeAssistant() {
    if (!openAssistant) return;
    const bubble = openAssistant;
    openAssistant = null;
    const raw = bubble.dataset.raw || "";
    let action;
    try {
      action = JSON.parse(raw);
    } catch (_) {
      return; // plain text (or not an action): leave it as streamed
    }
    if (!action || typeof action !== "object" || typeof action.tool !== "string") return;
    bubble.textContent = "";
    bubble.title = raw;
    if (typeof action.thought === "string" && action.thought) {
      bubble.appendChild(el("div", "thought", action.thought));
    }
    const args = action.args && typeof action.args === "object" ? action.args : {};
    let detail;
    if (action.tool === "finish" && typeof args.message === "string") detail = args.message;
    else if (typeof args.path === "string") detail = args.path;
    else if (typeof args.command === "string") detail = args.command;
    else if (typeof args.pattern === "string") detail = args.pattern;
    else detail = shorten(JSON.stringify(args), 160);
    const line = el("div", "action");
    line.appendChild(el("span", "tool", action.tool));
    if (detail) line.appendChild(el("span", "detail", " " + detail));
    bubble.appendChild(line);
  }

  function shorten(text, max) {
    if (typeof text !== "string") return "";
    return text.length > max ? text.slice(0, max - 1) + "…" : text;
  }

  function addDelta(text) {
    if (!openAssistant) {
      openAssistant = append(el("div", "msg assistant"));
      openAssistant.dataset.raw = "";
    }
    openAssistant.dataset.raw += text;
    openAssistant.textContent = openAssistant.dataset.raw;
    scrollToEnd();
  }

  function addMessage(kind, text) {
    closeAssistant();
    return append(el("div", "msg " + kind, text));
  }

  function addStep(m) {
    closeAssistant();
    const node = el("div", "msg step");
    node.appendChild(el("span", "tool", m.tool));
    if (m.observation) node.appendChild(el("span", "observation", " " + shorten(m.observation, 300)));
    append(node);
  }

  function addSummary(m) {
    closeAssistant();
    const node = el("div", "msg summary");
    let head = "Context summarized";
    if (typeof m.tokensBefore === "number" && typeof m.tokensAfter === "number") {
      head += ` (${m.tokensBefore} → ${m.tokensAfter} tokens)`;
    }
    node.appendChild(el("div", "summary-head", head));
    node.appendChild(el("div", "summary-text", m.summary));
    append(node);
  }

  function addDone(m) {
    closeAssistant();
    const node = el("div", "msg done");
    node.dataset.status = m.status;
    node.appendChild(el("span", "done-status", m.status));
    if (m.message) node.appendChild(el("span", "done-message", " " + m.message));
    append(node);
  }

  function cardFor(suggestionId) {
    for (const card of messages.querySelectorAll("div.edit-card")) {
      if (card.dataset.suggestionId === suggestionId) return card;
    }
    return null;
  }

  function diffLine(line) {
    let cls = "ctx";
    if (line.startsWith("@@")) cls = "hdr";
    else if (line.startsWith("+")) cls = "add";
    else if (line.startsWith("-")) cls = "del";
    else if (line.startsWith("\\")) cls = "meta";
    return el("span", "line " + cls, line + "\n");
  }

  function actionButton(className, label, title, message) {
    const button = el("button", className, label);
    button.type = "button";
    button.title = title;
    button.addEventListener("click", () => vscode.postMessage(message));
    return button;
  }

  function addEdit(m) {
    closeAssistant();
    const card = el("div", "edit-card");
    card.dataset.suggestionId = m.suggestionId;
    const head = el("div", "edit-head");
    const path = el("a", "path", m.path);
    path.href = "#";
    path.title = "Show the proposed diff in an editor";
    path.addEventListener("click", (event) => {
      event.preventDefault();
      vscode.postMessage({ type: "showDiff", suggestionId: m.suggestionId });
    });
    head.appendChild(path);
    card.appendChild(head);

    const diff = el("pre", "diff");
    for (const hunk of m.hunks) {
      const block = el("div", "hunk");
      block.dataset.index = String(hunk.index);
      const bar = el("div", "hunk-bar");
      bar.appendChild(el("span", "hunk-title", `Hunk ${hunk.index + 1}`));
      bar.appendChild(actionButton("accept-hunk", "✓", `Accept hunk ${hunk.index + 1}`,
        { type: "acceptHunk", suggestionId: m.suggestionId, index: hunk.index }));
      bar.appendChild(actionButton("reject-hunk", "✗", `Reject hunk ${hunk.index + 1}`,
        { type: "rejectHunk", suggestionId: m.suggestionId, index: hunk.index }));
      block.appendChild(bar);
      const lines = hunk.diff.split("\n");
      if (lines.length && lines[lines.length - 1] === "") lines.pop();
      for (const line of lines) block.appendChild(diffLine(line));
      diff.appendChild(block);
    }
    card.appendChild(diff);

    const actions = el("div", "edit-actions");
    actions.appendChild(actionButton("accept", "Accept edit", "Accept every hunk",
      { type: "acceptEdit", suggestionId: m.suggestionId }));
    actions.appendChild(actionButton("reject", "Reject edit", "Reject the edit (you may give a reason)",
      { type: "rejectEdit", suggestionId: m.suggestionId }));
    card.appendChild(actions);
    append(card);
  }

  // A note on a card (the file changed under the proposal): shown above its diff.
  function editNotice(m) {
    const card = cardFor(m.suggestionId);
    if (!card) return;
    let notice = card.querySelector("div.notice");
    if (!notice) {
      notice = el("div", "notice");
      notice.setAttribute("role", "note");
      card.insertBefore(notice, card.querySelector("pre.diff"));
    }
    notice.textContent = m.text;
  }

  function hunkDecided(m) {
    const card = cardFor(m.suggestionId);
    if (!card) return;
    const block = card.querySelector(`div.hunk[data-index="${Number(m.index)}"]`);
    if (!block) return;
    block.classList.remove("accepted", "rejected");
    block.classList.add(m.accepted ? "accepted" : "rejected");
    block.dataset.decision = m.accepted ? "accepted" : "rejected";
  }

  const STATUS_TEXT = {
    accepted: "accepted",
    rejected: "rejected",
    partially_accepted: "partially accepted",
    expired: "expired (the turn ended before a decision)",
  };

  function editDecided(m) {
    const card = cardFor(m.suggestionId);
    if (!card) return;
    for (const button of card.querySelectorAll("button")) button.disabled = true;
    for (const index of m.acceptedHunks || []) hunkDecided({ suggestionId: m.suggestionId, index, accepted: true });
    for (const block of card.querySelectorAll("div.hunk")) {
      if (m.outcome === "expired") break;
      if (!block.dataset.decision) hunkDecided({ suggestionId: m.suggestionId, index: block.dataset.index, accepted: m.outcome === "accepted" });
    }
    card.classList.add("decided", m.outcome);
    let status = card.querySelector(".status");
    if (!status) {
      status = el("span", "status");
      card.querySelector(".edit-actions").appendChild(status);
    }
    status.textContent = STATUS_TEXT[m.outcome] || m.outcome;
    if (m.reason) status.title = "Reason: " + m.reason;
  }

  function setBusy(busy) {
    cancelButton.hidden = !busy;
    document.body.classList.toggle("busy", busy);
  }

  function render(m) {
    switch (m.type) {
      case "user": addMessage("user", m.text); break;
      case "delta": addDelta(m.text); break;
      case "step": addStep(m); break;
      case "summary": addSummary(m); break;
      case "done": addDone(m); break;
      case "error": addMessage("error", m.message); break;
      case "info": addMessage("info", m.text); break;
      case "edit": addEdit(m); break;
      case "editNotice": editNotice(m); break;
      case "hunkDecided": hunkDecided(m); break;
      case "editDecided": editDecided(m); break;
      case "busy": setBusy(m.busy); break;
      case "connection":
        connection.textContent = m.text;
        connection.dataset.state = m.state;
        break;
      case "reset":
        openAssistant = null;
        messages.textContent = "";
        setBusy(false);
        break;
      case "replay":
        openAssistant = null;
        messages.textContent = "";
        for (const inner of m.messages) render(inner);
        break;
      default:
        break; // a newer extension's message kind: ignore rather than break the view
    }
  }

  window.addEventListener("message", (event) => render(event.data));

  function send() {
    const text = prompt.value;
    if (!text.trim()) return;
    prompt.value = "";
    vscode.postMessage({ type: "send", text });
  }

  sendButton.addEventListener("click", send);
  prompt.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  newSessionButton.addEventListener("click", () => vscode.postMessage({ type: "newSession" }));
  cancelButton.addEventListener("click", () => vscode.postMessage({ type: "cancel" }));

  // Ask for the transcript so far: a re-created view shows what the old one showed.
  vscode.postMessage({ type: "ready" });
  document.body.dataset.ready = "1";
})();
