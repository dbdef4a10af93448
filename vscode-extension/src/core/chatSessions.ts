// The chat's one agent session, as the VS Code chat (vscode/chatController.ts) holds it, kept
// free of `vscode` so it is unit-tested. The session is opened on the first message or --
// when an id is remembered from an earlier editor run (sessionMemory.ts) -- as soon as a
// connection opens, so a restarted editor resumes it (`session.resume`, never a new
// `session.create`) and can show its history. One open runs at a time: a connection and a
// first message arriving together share it. A closed connection drops the session object but
// the id stays remembered for the next connection; New session forgets it, and an open still
// in flight then is let go instead of becoming the chat's session again.

import type { AgentConnection } from "./connection";
import type { AgentSession } from "./session";
import { SessionMemory, type OpenedSession } from "./sessionMemory";
import type { CreateOptions, EditorHost } from "./sessionTypes";

export interface ChatOpened extends OpenedSession {
  /** Resumed, and its history not shown in this window yet (the chat is fresh). */
  showHistory: boolean;
}

/** Told of each session the chat opens; returns what to call when the chat lets go of it. */
export type OnOpened = (opened: ChatOpened) => () => void;

export class ChatSessions {
  private session: AgentSession | undefined;
  private release: (() => void) | undefined;
  private opening: Promise<AgentSession> | undefined;
  private historyShown = false;
  private generation = 0; // bumped by reset(): an open begun before it is dropped

  constructor(
    private readonly memory: SessionMemory,
    private readonly host: EditorHost,
    private readonly createOptions: (firstText: string) => CreateOptions,
    private readonly onOpened: OnOpened,
  ) {}

  /** The chat's open session, if any. */
  get current(): AgentSession | undefined {
    return this.session;
  }

  get rememberedId(): string | undefined {
    return this.memory.id;
  }

  /** The session on `conn`: the open one, the remembered one resumed, or a new one titled
   * after `firstText`. Rejects with the connection's or the server's error. */
  open(conn: AgentConnection, firstText: string): Promise<AgentSession> {
    if (this.session && this.session.conn === conn && !conn.closed) return Promise.resolve(this.session);
    if (!this.opening) {
      this.drop();
      const generation = this.generation;
      const opening = this.memory
        .open(conn, this.host, () => this.createOptions(firstText))
        .then((opened) => this.adopt(opened, generation));
      const clear = () => {
        if (this.opening === opening) this.opening = undefined;
      };
      opening.then(clear, clear);
      this.opening = opening;
    }
    return this.opening;
  }

  /** A connection opened: resume the remembered session now; nothing when none is
   * remembered (an empty session is made by the first message, not by starting the editor). */
  async connected(conn: AgentConnection): Promise<AgentSession | undefined> {
    if (!this.memory.id || (this.session?.conn === conn && !conn.closed)) return undefined;
    return this.open(conn, "");
  }

  /** `conn` closed: let go of its session (the id stays remembered). True if it was the chat's. */
  lost(conn: AgentConnection): boolean {
    if (this.session?.conn !== conn) return false;
    this.drop();
    return true;
  }

  /** New session: forget the current one; the next message creates a new one. */
  async reset(): Promise<void> {
    this.drop();
    this.opening = undefined;
    this.generation++;
    this.historyShown = true; // the person cleared the chat: no history comes back into it
    await this.memory.forget();
  }

  dispose(): void {
    this.drop();
  }

  private async adopt(opened: OpenedSession, generation: number): Promise<AgentSession> {
    if (generation !== this.generation) {
      opened.session.dispose();
      await this.memory.forget(); // open() remembered it; New session came after
      throw new Error("A new chat session was started meanwhile.");
    }
    const showHistory = opened.resumed && !this.historyShown;
    this.historyShown = true;
    this.session = opened.session;
    this.release = this.onOpened({ ...opened, showHistory });
    return opened.session;
  }

  private drop(): void {
    this.release?.();
    this.release = undefined;
    this.session?.dispose();
    this.session = undefined;
  }
}
