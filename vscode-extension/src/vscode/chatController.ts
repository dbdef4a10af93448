// The chat's logic between the webview and the agent: one AgentSession (created on the first
// message, resumed after a reconnect), one turn at a time with the editor context attached,
// session events rendered as chat messages, and the card buttons routed to the same
// commands as the CodeLens. Every posted message is kept for replay into a re-created view.
// The session id is remembered in the workspace state (core/sessionMemory.ts, core/
// chatSessions.ts): after an editor restart the first connection resumes that session and the
// chat shows its transcript; a session the server no longer has is replaced by a new one, and
// the chat says so.
import * as vscode from "vscode";
import { ChatSessions, type ChatOpened } from "../core/chatSessions";
import type { AgentSession, CreateOptions, EditDecision, EditorHost, SessionEvent } from "../core/session";
import { transcriptMessages, type SessionMemory } from "../core/sessionMemory";
import { ServerError } from "../core/errors";
import type { AgentConnection } from "../core/connection";
import { Transcript, cardCommand, type FromWebview, type ToWebview } from "../core/chatMessages";
import type { ChatViewProvider } from "./chatView";
import type { ConnectionManager } from "./connectionManager";
import { currentEditorContext } from "./editorContext";
import type { EditReviewer, ReviewListener } from "./editReview";
import { Log, describeError } from "./log";
import { describeModel } from "./statusBar";
import { workspaceRoot } from "./workspacePaths";

export class ChatController implements ReviewListener, vscode.Disposable {
  private readonly sessions: ChatSessions;
  private readonly transcript = new Transcript();
  private busy = false;
  private turnSeq = 0; // which send() owns `busy`
  private view: ChatViewProvider | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly manager: ConnectionManager,
    private readonly host: EditorHost,
    private readonly reviewer: () => EditReviewer,
    private readonly log: Log,
    private readonly onNewSession: () => void,
    memory: SessionMemory, // the session id, kept across reconnects and editor restarts
  ) {
    this.sessions = new ChatSessions(memory, host, createOptions, (opened) => this.opened(opened));
    this.disposables.push(
      manager.onDidChangeState(() => this.postConnection()),
      manager.onDidConnect((conn) => void this.resumeOnConnect(conn)),
      manager.onDidDisconnect((conn) => this.connectionLost(conn)),
    );
  }

  attach(view: ChatViewProvider): void {
    this.view = view;
  }

  /** The page (re)loaded: show it everything so far. */
  replay(): void {
    this.view?.post({ type: "replay", messages: this.transcript.messages });
    this.view?.post({ type: "busy", busy: this.busy });
    this.postConnection();
  }

  get currentSession(): AgentSession | undefined {
    return this.sessions.current;
  }

  handle(m: FromWebview): void {
    switch (m.type) {
      case "send":
        void this.send(m.text);
        break;
      case "newSession":
        void this.newSession();
        break;
      case "cancel":
        this.cancel();
        break;
      default: {
        const card = cardCommand(m);
        if (card) void vscode.commands.executeCommand(card.command, ...card.args);
        break;
      }
    }
  }

  /** One turn: the person's text, with the editor context, until turn.done. */
  async send(text: string): Promise<void> {
    if (!text.trim()) return;
    this.post({ type: "user", text });
    if (this.busy) {
      this.post({ type: "error", message: "The agent is still working on the last message; wait for it or press Stop." });
      return;
    }
    this.setBusy(true);
    const turn = ++this.turnSeq;
    let session: AgentSession | undefined;
    try {
      session = await this.sessions.open(await this.manager.ensure(true), text);
      const context = currentEditorContext();
      await session.send(text, context);
    } catch (error) {
      if (turn !== this.turnSeq) return; // abandoned by New session: nobody is waiting for it
      this.log.error("The turn failed", error);
      this.post({ type: "error", message: turnError(error) });
    } finally {
      if (turn === this.turnSeq) {
        this.setBusy(false);
        if (session) this.reviewer().expire(session.id);
      }
    }
  }

  cancel(): void {
    const session = this.sessions.current;
    if (!session || !this.busy) return;
    try {
      session.cancel();
      this.log.info("Asked the server to stop the turn.");
    } catch (error) {
      this.post({ type: "error", message: `Could not stop the turn: ${describeError(error)}` });
    }
  }

  /** Forget the session (it stays stored on the server) and clear the chat. */
  async newSession(): Promise<void> {
    if (this.busy) {
      this.cancel();
      this.turnSeq++; // the running send() resolves into nothing once its session is dropped
      this.setBusy(false);
    }
    await this.sessions.reset();
    this.reviewer().expire();
    this.onNewSession();
    this.post({ type: "reset" });
    this.log.info("New chat session (created on the next message).");
  }

  // ---- ReviewListener: decisions made in the editor, the card or by command ----------

  hunkDecided(suggestionId: string, index: number, accepted: boolean): void {
    this.post({ type: "hunkDecided", suggestionId, index, accepted });
  }

  editDecided(suggestionId: string, decision: EditDecision): void {
    this.post({
      type: "editDecided",
      suggestionId,
      outcome: decision.outcome,
      acceptedHunks: decision.acceptedHunks,
      reason: decision.reason,
    });
  }

  editExpired(suggestionId: string): void {
    this.post({ type: "editDecided", suggestionId, outcome: "expired" });
  }

  editNotice(suggestionId: string, text: string): void {
    this.post({ type: "editNotice", suggestionId, text });
  }

  dispose(): void {
    this.sessions.dispose();
    for (const d of this.disposables) d.dispose();
  }

  // ---- internals -------------------------------------------------------------------------

  /** A (re)connection: continue the remembered session now, so the chat shows its history. */
  private async resumeOnConnect(conn: AgentConnection): Promise<void> {
    try {
      await this.sessions.connected(conn);
    } catch (error) {
      // The next message tries again (or makes a new session if the server refused this one).
      this.log.error(`Could not resume session ${this.sessions.rememberedId ?? ""}`, error);
    }
  }

  private opened({ session, resumed, notice, showHistory }: ChatOpened): () => void {
    if (notice) {
      this.log.warn(notice);
      this.post({ type: "info", text: notice });
    }
    const history = showHistory ? transcriptMessages(session.info.transcript ?? []) : [];
    if (history.length) this.post({ type: "info", text: `Resumed chat session ${session.id.slice(0, 8)}:` });
    for (const m of history) this.post(m);
    this.log.info(resumed ? `Resumed session ${session.id}.` : `Created session ${session.id} (${describeModel(session.conn.welcome)}).`);
    return session.onEvent((e) => this.render(e));
  }

  private render(e: SessionEvent): void {
    switch (e.kind) {
      case "delta":
        this.post({ type: "delta", text: e.message.text });
        break;
      case "step":
        this.post({ type: "step", tool: e.message.tool, observation: e.message.observation });
        break;
      case "summary":
        this.post({
          type: "summary",
          summary: e.message.summary,
          tokensBefore: e.message.tokens_before,
          tokensAfter: e.message.tokens_after,
        });
        break;
      case "edit":
        this.post({
          type: "edit",
          suggestionId: e.message.suggestion_id,
          path: e.message.path,
          diff: e.message.diff,
          hunks: e.message.hunks,
        });
        break;
      case "edit_decided":
        if (e.error) {
          this.log.error(`Recording the decision on ${e.message.path} failed`, e.error);
          this.post({ type: "error", message: `The decision on ${e.message.path} was not recorded: ${describeError(e.error)}` });
        }
        break;
      case "command":
        this.post({ type: "info", text: `${e.approved ? "Approved" : "Declined"}: ${e.message.command}` });
        break;
      case "write_rebased":
        this.post({ type: "info", text: `Applied the accepted edit of ${e.path} on top of your changes to it.` });
        break;
      case "write_refused":
        this.log.warn(`Refused the agent's write of ${e.path}: ${e.message}`);
        this.post({ type: "info", text: `${e.path} changed since the agent read it; the agent was asked to read it again and redo its edit.` });
        break;
      case "done":
        this.post({ type: "done", status: e.message.status, message: e.message.message });
        break;
      case "error":
        this.log.error(`Server error in the session: ${e.message.code}: ${e.message.message}`);
        this.post({ type: "error", message: `${e.message.code}: ${e.message.message}` });
        break;
      default:
        break;
    }
  }

  private connectionLost(conn: AgentConnection): void {
    const session = this.sessions.current;
    if (session?.conn !== conn) return;
    this.reviewer().expire(session.id);
    this.sessions.lost(conn); // the id stays remembered: the next connection resumes it
  }

  private setBusy(busy: boolean): void {
    this.busy = busy;
    this.view?.post({ type: "busy", busy });
  }

  private postConnection(): void {
    const state = this.manager.state;
    const welcome = this.manager.welcome;
    const text = state === "connected" && welcome ? describeModel(welcome) : `Apprentice: ${state}`;
    this.view?.post({ type: "connection", state, text });
  }

  private post(m: ToWebview): void {
    this.transcript.add(m);
    this.view?.post(m);
  }
}

/** A new session: interactive, titled after the first message, in the first workspace folder. */
function createOptions(firstText: string): CreateOptions {
  const folder = vscode.workspace.workspaceFolders?.[0];
  return {
    mode: "interactive",
    title: firstText.split("\n")[0].slice(0, 80),
    workspace: folder?.name ?? workspaceRoot()?.fsPath,
  };
}

function turnError(error: unknown): string {
  if (error instanceof ServerError) return `${error.code}: ${error.message}`;
  return describeError(error);
}
