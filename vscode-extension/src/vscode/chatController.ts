// The chat's logic between the webview and the agent: one AgentSession (created on the first
// message, resumed after a reconnect), one turn at a time with the editor context attached,
// session events rendered as chat messages, and the card buttons routed to the same
// commands as the CodeLens. Every posted message is kept for replay into a re-created view.
import * as vscode from "vscode";
import { AgentSession, type EditDecision, type EditorHost, type SessionEvent } from "../core/session";
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
  private session: AgentSession | undefined;
  private sessionId: string | undefined; // kept across reconnects to resume
  private offSession: (() => void) | undefined;
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
  ) {
    this.disposables.push(
      manager.onDidChangeState(() => this.postConnection()),
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
    return this.session;
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
      session = await this.ensureSession(text);
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
    if (!this.session || !this.busy) return;
    try {
      this.session.cancel();
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
    this.dropSession();
    this.sessionId = undefined;
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
    this.dropSession();
    for (const d of this.disposables) d.dispose();
  }

  // ---- internals -------------------------------------------------------------------------

  private async ensureSession(firstText: string): Promise<AgentSession> {
    const conn = await this.manager.ensure(true);
    if (this.session && this.session.conn === conn && !conn.closed) return this.session;
    this.dropSession();
    let session: AgentSession | undefined;
    if (this.sessionId) {
      try {
        session = await AgentSession.resume(conn, this.host, this.sessionId);
        this.log.info(`Resumed session ${session.id}.`);
      } catch (error) {
        this.log.error(`Could not resume session ${this.sessionId}; starting a new one`, error);
        this.post({ type: "info", text: `The previous session could not be resumed (${describeError(error)}); this is a new one.` });
      }
    }
    if (!session) {
      const folder = vscode.workspace.workspaceFolders?.[0];
      session = await AgentSession.create(conn, this.host, {
        mode: "interactive",
        title: firstText.split("\n")[0].slice(0, 80),
        workspace: folder?.name ?? workspaceRoot()?.fsPath,
      });
      this.log.info(`Created session ${session.id} (${describeModel(conn.welcome)}).`);
    }
    this.session = session;
    this.sessionId = session.id;
    this.offSession = session.onEvent((e) => this.render(e));
    return session;
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
    if (this.session?.conn !== conn) return;
    this.reviewer().expire(this.session.id);
    this.dropSession(); // sessionId stays: the next message resumes it on the new connection
  }

  private dropSession(): void {
    this.offSession?.();
    this.offSession = undefined;
    this.session?.dispose();
    this.session = undefined;
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

function turnError(error: unknown): string {
  if (error instanceof ServerError) return `${error.code}: ${error.message}`;
  return describeError(error);
}
