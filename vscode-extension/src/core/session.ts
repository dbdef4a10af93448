// `AgentSession`: one agent session on an AgentConnection. It runs turns (user.message ->
// turn.done), answers the agent's tool requests through the EditorHost's WorkspaceTools, asks
// the host to review edits and approve commands, and sends edit outcomes idempotently
// (a client_event_id kept across retries). Incoming messages are never blocked on the
// person: reviews and approvals run concurrently with tool requests. The agent's write_file
// goes through a WriteGuard (writeGuard.ts), so it never undoes what the person changed after
// the agent read the file. The types it shares with the editor are in sessionTypes.ts,
// sending an outcome in sendOutcome.ts (both re-exported here).

import type { AgentConnection } from "./connection";
import { ConnectionFailed, ServerError } from "./errors";
import { sendOutcome, type OutcomeExtra } from "./sendOutcome";
import type { CreateOptions, EditDecision, EditorHost, SessionEvent, UnsavedTexts } from "./sessionTypes";
import { answerToolRequest, ToolError, type ToolReply, type WorkspaceTools } from "./tools";
import { ABSENT, WriteGuard } from "./writeGuard";
import {
  isMessage,
  newEventId,
  type CommandApprovalRequest,
  type EditProposed,
  type EditorContext,
  type OutcomeAck,
  type OutcomeKind,
  type ServerMessage,
  type SessionInfo,
  type TurnDone,
} from "../protocol/messages";
import { EDITOR_REASON_PREFIX } from "../protocol/vocab";

export type { CreateOptions, EditDecision, EditorHost, SessionEvent, UnsavedTexts } from "./sessionTypes";
export { sendOutcome, type OutcomeExtra } from "./sendOutcome";


export class AgentSession {
  private readonly listeners = new Set<(e: SessionEvent) => void>();
  private readonly unsubscribe: Array<() => void> = [];
  private turn?: { id: string; resolve: (d: TurnDone) => void; reject: (e: Error) => void };
  private readonly guard = new WriteGuard();

  private constructor(
    readonly conn: AgentConnection,
    readonly host: EditorHost,
    public info: SessionInfo,
  ) {
    this.unsubscribe.push(conn.onMessage((m) => this.dispatch(m)));
    this.unsubscribe.push(
      conn.onClose(({ code }) => {
        this.turn?.reject(new ConnectionFailed("closed", `The connection closed (${code}) during the turn.`));
        this.turn = undefined;
      }),
    );
  }

  static async create(conn: AgentConnection, host: EditorHost, opts: CreateOptions = {}): Promise<AgentSession> {
    const info = await conn.request({ type: "session.create", ...opts }, isMessage("session.info"));
    return new AgentSession(conn, host, info);
  }

  static async resume(conn: AgentConnection, host: EditorHost, sessionId: string): Promise<AgentSession> {
    const info = await conn.request({ type: "session.resume", session_id: sessionId }, isMessage("session.info"));
    return new AgentSession(conn, host, info);
  }

  get id(): string {
    return this.info.session_id;
  }

  /** True while a turn runs. */
  get busy(): boolean {
    return this.turn !== undefined;
  }

  onEvent(fn: (e: SessionEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Run one turn; resolves with turn.done (whatever its status), rejects with ServerError
   * when the server refuses the message (e.g. turn_in_progress) or ConnectionFailed. */
  send(text: string, context?: EditorContext): Promise<TurnDone> {
    if (this.turn) {
      return Promise.reject(new ServerError("turn_in_progress", "A turn is already running; wait for it or cancel it."));
    }
    const id = newEventId();
    return new Promise<TurnDone>((resolve, reject) => {
      const finish = () => {
        this.turn = undefined;
      };
      this.turn = {
        id,
        resolve: (d) => (finish(), resolve(d)),
        reject: (e) => (finish(), reject(e)),
      };
      try {
        this.conn.send({ type: "user.message", id, session_id: this.id, text, ...(context ? { context } : {}) });
      } catch (err) {
        this.turn.reject(err as Error);
      }
    });
  }

  /** Ask the server to stop the running turn; it ends with turn.done status cancelled. */
  cancel(): void {
    this.conn.send({ type: "cancel", id: newEventId(), session_id: this.id });
  }

  reportOutcome(suggestionId: string, outcome: OutcomeKind, extra: OutcomeExtra = {}): Promise<OutcomeAck> {
    return sendOutcome(this.conn, suggestionId, outcome, extra);
  }

  /** Stop listening to the connection (the session stays stored on the server). */
  dispose(): void {
    for (const off of this.unsubscribe.splice(0)) off();
    this.listeners.clear();
  }

  private emit(event: SessionEvent): void {
    for (const fn of [...this.listeners]) {
      try {
        fn(event);
      } catch {
        // A listener's bug must not stop the protocol; the listener logs its own errors.
      }
    }
  }

  private dispatch(m: ServerMessage): void {
    if (m.type === "error") {
      if (this.turn && m.id === this.turn.id) {
        this.turn.reject(new ServerError(m.code, m.message, m.session_id));
      } else if (m.session_id === this.id) {
        this.emit({ kind: "error", message: m });
      }
      return;
    }
    if (!("session_id" in m) || m.session_id !== this.id) return;
    switch (m.type) {
      case "assistant.delta":
        this.emit({ kind: "delta", message: m });
        break;
      case "agent.step":
        this.emit({ kind: "step", message: m });
        break;
      case "summary.made":
        this.emit({ kind: "summary", message: m });
        break;
      case "tool.request":
        void this.answerTool(m.request_id, m.method, m.params ?? {});
        break;
      case "command.approval.request":
        void this.approve(m);
        break;
      case "edit.proposed":
        this.emit({ kind: "edit", message: m });
        void this.review(m);
        break;
      case "turn.done":
        this.emit({ kind: "done", message: m });
        this.turn?.resolve(m);
        break;
      default:
        break;
    }
  }

  private async answerTool(requestId: string, method: string, params: Record<string, unknown>): Promise<void> {
    let reply: ToolReply;
    if (method === "write_file" && typeof params.path === "string" && typeof params.text === "string") {
      reply = await this.guardedWrite(params.path, params.text, params);
    } else {
      reply = await answerToolRequest(this.host.tools, method, params);
      if (method === "read_file" && typeof params.path === "string") {
        if ("result" in reply && typeof reply.result.text === "string") this.guard.noteServed(params.path, reply.result.text);
        if ("error" in reply && reply.error.code === "file_not_found") this.guard.noteServed(params.path, ABSENT);
      }
    }
    this.trySend(() => this.conn.send({ type: "tool.result", request_id: requestId, ...reply }));
  }

  /** write_file through the WriteGuard: as sent, rebased onto the person's changes, or refused. */
  private async guardedWrite(path: string, incoming: string, params: Record<string, unknown>): Promise<ToolReply> {
    const tools = this.host.tools;
    let current: string | undefined;
    try {
      current = await tools.readFile(path);
    } catch (err) {
      const code = err instanceof ToolError ? err.code : "workspace_error";
      // A file that cannot be read (too large, binary) was never served either: let the
      // write itself decide. Otherwise the file cannot be compared, so it is not written.
      if (code !== "file_not_found" && this.guard.servedText(path) !== undefined) {
        return { error: { code, message: `write_file of '${path}' was not applied: ${(err as Error).message}` } };
      }
    }
    const unsavedSource = tools as WorkspaceTools & Partial<UnsavedTexts>;
    const unsaved = typeof unsavedSource.unsavedText === "function" ? await unsavedSource.unsavedText(path).catch(() => undefined) : undefined;
    const verdict = this.guard.decide(path, incoming, current, unsaved);
    if ("refuse" in verdict) {
      this.emit({ kind: "write_refused", path, message: verdict.refuse.message });
      return { error: { code: verdict.refuse.code, message: verdict.refuse.message } };
    }
    const reply = await answerToolRequest(tools, "write_file", { ...params, text: verdict.write });
    if ("result" in reply) {
      this.guard.noteWritten(path, incoming);
      this.host.outcomes?.noteWritten(path, verdict.write);
      if (verdict.rebased) this.emit({ kind: "write_rebased", path });
    }
    return reply;
  }

  private async approve(r: CommandApprovalRequest): Promise<void> {
    let approved = false;
    try {
      approved = await this.host.approveCommand(r);
    } catch {
      approved = false; // no answer from the person is a no
    }
    this.emit({ kind: "command", message: r, approved });
    this.trySend(() =>
      this.conn.send({
        type: "command.approval.response",
        request_id: r.request_id,
        approved,
        ...(approved ? {} : { reason: "The person declined to run this command." }),
      }),
    );
  }

  private async review(p: EditProposed): Promise<void> {
    let decision: EditDecision;
    try {
      decision = await this.host.reviewEdit(p);
    } catch (err) {
      // No person decided this; the protocol has no outcome for it and the agent waits for
      // one. A rejection tells the agent; the prefix marks it as the editor's, not a label.
      decision = { outcome: "rejected", reason: `${EDITOR_REASON_PREFIX}The editor could not show the proposal: ${(err as Error).message}` };
    }
    if (decision.outcome !== "rejected") {
      const all = p.hunks.map((h) => h.index);
      const accepted = decision.outcome === "accepted" ? all : decision.acceptedHunks ?? [];
      this.guard.noteAccepted(p.path, { suggestionId: p.suggestion_id, hunks: p.hunks, accepted });
    }
    if (decision.outcome !== "rejected" && this.host.outcomes) {
      // Read before answering: the server writes the file only after it has the outcome.
      const beforeText = await this.host.tools.readFile(p.path).catch(() => undefined);
      this.host.outcomes.expectWrite({ suggestionId: p.suggestion_id, path: p.path, beforeText });
    } else if (decision.outcome === "rejected" && this.host.outcomes && !decision.reason?.startsWith(EDITOR_REASON_PREFIX)) {
      // The person said no: what they write in the file instead is followed up ("written").
      // An editor's rejection decided nothing, so nothing is followed.
      const beforeText = await this.host.tools.readFile(p.path).catch(() => undefined);
      void this.host.outcomes.trackRejected({ suggestionId: p.suggestion_id, path: p.path, beforeText });
    }
    try {
      const ack = await this.reportOutcome(p.suggestion_id, decision.outcome, {
        reason: decision.reason,
        acceptedHunks: decision.outcome === "partially_accepted" ? decision.acceptedHunks ?? [] : undefined,
      });
      this.emit({ kind: "edit_decided", message: p, decision, ack });
    } catch (err) {
      this.emit({ kind: "edit_decided", message: p, decision, error: err as Error });
    }
  }

  private trySend(send: () => void): void {
    try {
      send();
    } catch {
      // The connection closed; onClose already failed the turn.
    }
  }
}
