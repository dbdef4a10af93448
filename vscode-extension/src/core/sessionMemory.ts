// Which agent session the chat continues, kept across editor restarts. The session id lives in
// a key-value store -- VS Code's ExtensionContext.workspaceState (a Memento) in the extension,
// a Map in the tests -- so a reloaded or restarted window sends `session.resume` with it
// instead of `session.create`. When the server answers that it has no such session (its
// database was replaced) or that another window holds it, a new session is created and the
// notice says why; a failed connection is thrown as it is, and the id is kept for the next try.
// `transcriptMessages` turns the transcript of `session.info` into chat messages, so the
// resumed chat shows its history.

import type { ToWebview } from "./chatMessages";
import type { AgentConnection } from "./connection";
import { ServerError } from "./errors";
import { AgentSession } from "./session";
import type { CreateOptions, EditorHost } from "./sessionTypes";
import type { TranscriptEntry } from "../protocol/messages";

/** The part of vscode.Memento used here. */
export interface SessionStore {
  get<T>(key: string): T | undefined;
  update(key: string, value: unknown): PromiseLike<void>;
}

export const SESSION_ID_KEY = "apprentice.sessionId";
// Prefix of a later user message in a transcript (agent_server/session/prompts.py FOLLOW_UP).
const FOLLOW_UP = "New message from the user:\n";

export interface OpenedSession {
  session: AgentSession;
  resumed: boolean;
  /** For the person: why the remembered session was not continued. */
  notice?: string;
}

export class SessionMemory {
  constructor(private readonly store: SessionStore) {}

  /** The remembered session id, if any. */
  get id(): string | undefined {
    const id = this.store.get<unknown>(SESSION_ID_KEY);
    return typeof id === "string" && id ? id : undefined;
  }

  remember(id: string): PromiseLike<void> {
    return this.store.update(SESSION_ID_KEY, id);
  }

  /** New session: the next one is created, not resumed. */
  forget(): PromiseLike<void> {
    return this.store.update(SESSION_ID_KEY, undefined);
  }

  /** Resume the remembered session, or create one (`create()`'s options) when there is none
   * or the server refuses it; the session now open is remembered. */
  async open(conn: AgentConnection, host: EditorHost, create: () => CreateOptions): Promise<OpenedSession> {
    const remembered = this.id;
    let notice: string | undefined;
    if (remembered) {
      try {
        const session = await AgentSession.resume(conn, host, remembered);
        await this.remember(session.id);
        return { session, resumed: true };
      } catch (error) {
        if (!(error instanceof ServerError)) throw error; // no answer: keep the id, try again later
        notice = refusedNotice(remembered, error);
      }
    }
    const session = await AgentSession.create(conn, host, create());
    await this.remember(session.id);
    return { session, resumed: false, notice };
  }
}

function refusedNotice(id: string, error: ServerError): string {
  const short = id.slice(0, 8);
  if (error.code === "session_not_found") {
    return `The previous chat session (${short}) is not on this server any more (a new or reset database?); this is a new session.`;
  }
  if (error.code === "session_in_use") {
    return `The previous chat session (${short}) is open in another window; this is a new session.`;
  }
  return `The previous chat session (${short}) could not be resumed (${error.code}: ${error.message}); this is a new session.`;
}

/** The chat messages that show a resumed session's transcript (task, last summary, steps). */
export function transcriptMessages(entries: readonly TranscriptEntry[]): ToWebview[] {
  const out: ToWebview[] = [];
  let call: string | undefined; // a tool call waits for its observation: one step in the chat
  const flush = () => {
    if (call !== undefined) out.push({ type: "step", tool: call });
    call = undefined;
  };
  for (const e of entries) {
    if (e.kind === "tool_call") {
      flush();
      const tool = e.text.split(" ", 1)[0];
      call = tool === "finish" ? undefined : tool; // the status line after it says the same
    } else if (e.kind === "observation" && e.role === "user") {
      flush();
      out.push({ type: "user", text: e.text.startsWith(FOLLOW_UP) ? e.text.slice(FOLLOW_UP.length) : e.text });
    } else if (e.kind === "observation") {
      out.push({ type: "step", tool: call ?? "tool", observation: e.text });
      call = undefined;
    } else {
      flush();
      if (e.kind === "task") out.push({ type: "user", text: e.text });
      if (e.kind === "summary") out.push({ type: "summary", summary: e.text });
      if (e.kind === "status") {
        const cut = e.text.indexOf(": ");
        out.push(cut < 0 ? { type: "done", status: e.text } : { type: "done", status: e.text.slice(0, cut), message: e.text.slice(cut + 2) || undefined });
      }
    }
  }
  flush();
  return out;
}
