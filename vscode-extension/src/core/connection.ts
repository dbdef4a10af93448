// `AgentConnection`: one WebSocket to the agent server (docs/protocol.md) over the `ws`
// package. It sends hello and waits for welcome, validates every server frame, fans messages
// out to listeners, and matches replies to requests by `id`. The token travels only in the
// Authorization header and is never logged or put into an error message.

import WebSocket from "ws";
import { ConnectionFailed, RequestTimeout, ServerError } from "./errors";
import {
  PROTOCOL_VERSION,
  ProtocolViolation,
  encode,
  newEventId,
  parseServerMessage,
  type ClientMessage,
  type ServerMessage,
  type Welcome,
} from "../protocol/messages";

export interface ConnectOptions {
  url: string;
  token?: string;
  clientName: string;
  timeoutMs?: number; // for the handshake and the welcome; default 10000
}

export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

type Listener<T> = (value: T) => void;

interface Pending {
  accept: (m: ServerMessage) => boolean;
  resolve: (m: ServerMessage) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

export class AgentConnection {
  private readonly messageListeners = new Set<Listener<ServerMessage>>();
  private readonly closeListeners = new Set<Listener<{ code: number; reason: string }>>();
  private readonly violationListeners = new Set<Listener<ProtocolViolation>>();
  private readonly pending = new Map<string, Pending>();
  private isClosed = false;

  private constructor(
    private readonly socket: WebSocket,
    readonly welcome: Welcome,
    readonly url: string,
  ) {
    socket.on("message", (data, isBinary) => this.receive(data, isBinary));
    socket.on("close", (code, reason) => this.closedBy(code, reason.toString()));
    socket.on("error", () => undefined); // 'close' follows and reports it
  }

  /** Connect, send hello, await welcome. Rejects with ConnectionFailed (kind says why). */
  static open(opts: ConnectOptions): Promise<AgentConnection> {
    const timeoutMs = opts.timeoutMs ?? 10_000;
    const shownUrl = opts.url.replace(/([?&]token=)[^&]*/, "$1***");
    return new Promise<AgentConnection>((resolve, reject) => {
      let settled = false;
      const headers: Record<string, string> = {};
      if (opts.token) headers.Authorization = `Bearer ${opts.token}`;
      const socket = new WebSocket(opts.url, { headers, handshakeTimeout: timeoutMs, perMessageDeflate: false });
      const fail = (err: ConnectionFailed) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.removeAllListeners();
        socket.on("error", () => undefined);
        socket.terminate();
        reject(err);
      };
      const timer = setTimeout(
        () => fail(new ConnectionFailed("timeout", `The Apprentice server at ${shownUrl} did not answer within ${timeoutMs} ms.`)),
        timeoutMs,
      );
      socket.on("unexpected-response", (_req, res) => {
        const status = res.statusCode ?? 0;
        if (status === 401 || status === 403) {
          fail(
            new ConnectionFailed(
              "unauthorized",
              `The Apprentice server at ${shownUrl} refused the token (HTTP ${status}). ` +
                "Run 'Apprentice: Set Server Token' with the token from $APPRENTICE_HOME/token " +
                "(or APPRENTICE_TOKEN).",
            ),
          );
        } else {
          fail(new ConnectionFailed("unreachable", `${shownUrl} answered HTTP ${status}; is it an Apprentice server's /v1/ws URL?`));
        }
      });
      socket.on("error", (err: NodeJS.ErrnoException) => {
        const timedOut = /timed out|timeout/i.test(err.message);
        fail(
          new ConnectionFailed(
            timedOut ? "timeout" : "unreachable",
            timedOut
              ? `The Apprentice server at ${shownUrl} did not answer within ${timeoutMs} ms.`
              : `Cannot reach the Apprentice server at ${shownUrl} (${err.code ?? err.message}). ` +
                  "Is `apprentice serve` running, and is apprentice.serverUrl right?",
          ),
        );
      });
      socket.on("close", (code, reason) => {
        fail(new ConnectionFailed("closed", `The server closed the connection before welcome (${code} ${reason.toString()}).`));
      });
      socket.on("open", () => {
        socket.send(encode({ type: "hello", protocol_version: PROTOCOL_VERSION, client: opts.clientName }));
      });
      socket.once("message", (data) => {
        let msg: ServerMessage;
        try {
          msg = parseServerMessage(data.toString());
        } catch (err) {
          fail(new ConnectionFailed("protocol", `The server's first message is not valid: ${(err as Error).message}`));
          return;
        }
        if (msg.type === "error") {
          fail(new ConnectionFailed("protocol", `The server refused hello: ${msg.code}: ${msg.message}`));
          return;
        }
        if (msg.type !== "welcome") {
          fail(new ConnectionFailed("protocol", `The server answered hello with '${msg.type}' instead of welcome.`));
          return;
        }
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.removeAllListeners();
        resolve(new AgentConnection(socket, msg, opts.url));
      });
    });
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Every valid server message; returns the unsubscribe function. */
  onMessage(fn: Listener<ServerMessage>): () => void {
    this.messageListeners.add(fn);
    return () => this.messageListeners.delete(fn);
  }

  onClose(fn: Listener<{ code: number; reason: string }>): () => void {
    this.closeListeners.add(fn);
    return () => this.closeListeners.delete(fn);
  }

  /** Frames that failed validation (they are dropped, not delivered). */
  onProtocolViolation(fn: Listener<ProtocolViolation>): () => void {
    this.violationListeners.add(fn);
    return () => this.violationListeners.delete(fn);
  }

  send(msg: ClientMessage): void {
    if (this.isClosed) {
      throw new ConnectionFailed("closed", "The connection to the Apprentice server is closed; reconnect first.");
    }
    this.socket.send(encode(msg));
  }

  /** Send `msg` with a fresh id; resolve with the first reply carrying that id that `accept`s.
   * An `error` reply with that id rejects with ServerError. */
  request<T extends ServerMessage>(
    msg: ClientMessage,
    accept: (m: ServerMessage) => m is T,
    timeoutMs: number = DEFAULT_REQUEST_TIMEOUT_MS,
  ): Promise<T> {
    const id = newEventId();
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new RequestTimeout(`No answer to ${msg.type} within ${timeoutMs} ms.`));
      }, timeoutMs);
      this.pending.set(id, { accept, resolve: resolve as (m: ServerMessage) => void, reject, timer });
      try {
        this.send({ ...msg, id } as ClientMessage);
      } catch (err) {
        clearTimeout(timer);
        this.pending.delete(id);
        reject(err as Error);
      }
    });
  }

  close(): void {
    if (!this.isClosed) this.socket.close(1000, "client closed");
  }

  private receive(data: WebSocket.RawData, isBinary: boolean): void {
    let msg: ServerMessage;
    try {
      if (isBinary) throw new ProtocolViolation("The server sent a binary frame; the protocol uses text frames.");
      msg = parseServerMessage(data.toString());
    } catch (err) {
      const violation = err instanceof ProtocolViolation ? err : new ProtocolViolation(String(err));
      for (const fn of [...this.violationListeners]) fn(violation);
      return;
    }
    const waiting = msg.id ? this.pending.get(msg.id) : undefined;
    if (waiting && msg.id) {
      if (msg.type === "error") {
        this.settle(msg.id);
        waiting.reject(new ServerError(msg.code, msg.message, msg.session_id));
      } else if (waiting.accept(msg)) {
        this.settle(msg.id);
        waiting.resolve(msg);
      }
    }
    for (const fn of [...this.messageListeners]) fn(msg);
  }

  private settle(id: string): void {
    const waiting = this.pending.get(id);
    if (waiting) clearTimeout(waiting.timer);
    this.pending.delete(id);
  }

  private closedBy(code: number, reason: string): void {
    if (this.isClosed) return;
    this.isClosed = true;
    for (const [id, waiting] of this.pending) {
      this.settle(id);
      waiting.reject(new ConnectionFailed("closed", `The connection closed (${code}${reason ? ` ${reason}` : ""}) before the server answered.`));
    }
    for (const fn of [...this.closeListeners]) fn({ code, reason });
  }
}
