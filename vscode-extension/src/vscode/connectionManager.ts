// The one AgentConnection the extension holds: opened at startup and lazily on the first need,
// re-opened with backoff (1 s doubling to 30 s) when the server goes away, and, with
// apprentice.autoStartServer, preceded by starting a local `apprentice serve` when a loopback
// URL does not answer. Every state change and failure goes to the log (never the token) and
// the status bar; a refused token points the person at "Apprentice: Set Server Token".
import * as vscode from "vscode";
import { Backoff } from "../core/backoff";
import { AgentConnection } from "../core/connection";
import { ConnectionFailed } from "../core/errors";
import type { Welcome } from "../protocol/messages";
import { Log, describeError } from "./log";
import { LocalServer } from "./serverProcess";
import { isLoopbackUrl, readSettings } from "./settings";
import type { ConnectionState, StatusBar } from "./statusBar";
import { resolveToken } from "./token";

const SET_TOKEN = "Set Server Token";
const SHOW_LOG = "Show Log";

export class ConnectionManager implements vscode.Disposable {
  private conn: AgentConnection | undefined;
  private connecting: Promise<AgentConnection> | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly retries = new Backoff(1000, 30_000);
  private autoStartFailed = false;
  private disposed = false;
  private stateNow: ConnectionState = "offline";
  private readonly stateEmitter = new vscode.EventEmitter<ConnectionState>();
  private readonly connectEmitter = new vscode.EventEmitter<AgentConnection>();
  private readonly disconnectEmitter = new vscode.EventEmitter<AgentConnection>();
  /** The state changed (offline / connecting / connected). */
  readonly onDidChangeState = this.stateEmitter.event;
  /** A new connection is open (also after a reconnect). */
  readonly onDidConnect = this.connectEmitter.event;
  /** An open connection closed (the server went away, or we closed it). */
  readonly onDidDisconnect = this.disconnectEmitter.event;

  constructor(
    private readonly secrets: vscode.SecretStorage,
    private readonly log: Log,
    private readonly status: StatusBar,
    private readonly server: LocalServer,
    private readonly clientName: string,
  ) {}

  get state(): ConnectionState {
    return this.stateNow;
  }

  get welcome(): Welcome | undefined {
    return this.connection?.welcome;
  }

  /** The open connection, if any (never a closed one). */
  get connection(): AgentConnection | undefined {
    return this.conn && !this.conn.closed ? this.conn : undefined;
  }

  /**
   * The open connection, connecting first when needed. `notify`: show failures to the person
   * (an explicit action), otherwise only the log and the status bar hear of them.
   */
  ensure(notify = false): Promise<AgentConnection> {
    const open = this.connection;
    if (open) return Promise.resolve(open);
    if (!this.connecting) {
      this.clearRetry();
      this.connecting = this.connect().finally(() => (this.connecting = undefined));
    }
    const attempt = this.connecting;
    if (notify) attempt.catch((error) => this.tellPerson(error));
    return attempt;
  }

  /** The command apprentice.connect: try now (also auto-start again), report the result. */
  async connectNow(): Promise<void> {
    this.autoStartFailed = false;
    this.retries.reset();
    try {
      const conn = await this.ensure(true);
      void vscode.window.setStatusBarMessage(`Apprentice: connected to ${conn.welcome.model}`, 4000);
    } catch {
      // ensure(true) already told the person
    }
  }

  /** Close and connect again (e.g. after the token or the URL changed). */
  async reconnect(): Promise<void> {
    const old = this.conn;
    this.conn = undefined;
    old?.close();
    await this.connectNow();
  }

  dispose(): void {
    this.disposed = true;
    this.clearRetry();
    this.conn?.close();
    this.conn = undefined;
    this.stateEmitter.dispose();
    this.connectEmitter.dispose();
    this.disconnectEmitter.dispose();
  }

  private async connect(): Promise<AgentConnection> {
    const settings = readSettings();
    const url = settings.serverUrl;
    this.setState("connecting", { serverUrl: url });
    this.log.info(`Connecting to ${url}`);
    try {
      let conn: AgentConnection;
      try {
        conn = await this.open(url);
      } catch (error) {
        const canStart =
          error instanceof ConnectionFailed &&
          error.kind === "unreachable" &&
          settings.autoStartServer &&
          isLoopbackUrl(url) &&
          !this.autoStartFailed;
        if (!canStart) throw error;
        this.log.info(`Nothing answers at ${url}; starting a local server (apprentice.autoStartServer).`);
        try {
          await this.server.start(settings.serverCommand, url);
        } catch (startError) {
          this.autoStartFailed = true; // do not respawn on every background retry
          throw startError;
        }
        conn = await this.open(url); // the token file exists now
      }
      if (this.disposed) {
        conn.close();
        throw new Error("The extension is shutting down.");
      }
      this.attach(conn);
      return conn;
    } catch (error) {
      const problem = describeError(error);
      this.log.error(`Could not connect to ${url}`, error);
      this.setState("offline", { serverUrl: url, problem });
      const unauthorized = error instanceof ConnectionFailed && error.kind === "unauthorized";
      if (!unauthorized) this.scheduleRetry();
      throw error;
    }
  }

  private async open(url: string): Promise<AgentConnection> {
    const { token, source } = await resolveToken(this.secrets);
    this.log.redact(token);
    this.log.info(`Token: ${token ? `from ${source}` : "none found (secret storage, APPRENTICE_TOKEN, token file)"}.`);
    return AgentConnection.open({ url, token, clientName: this.clientName, timeoutMs: 10_000 });
  }

  private attach(conn: AgentConnection): void {
    this.conn = conn;
    this.retries.reset();
    const w = conn.welcome;
    this.log.info(`Connected to ${conn.url}: server ${w.server}, model ${w.model}, adapter ${w.adapter ?? "none"}.`);
    conn.onProtocolViolation((violation) => this.log.error("Protocol error (frame dropped)", violation));
    conn.onClose(({ code, reason }) => {
      this.log.warn(`Connection closed (${code}${reason ? ` ${reason}` : ""}).`);
      const current = this.conn === conn; // false: reconnect() already let go of it on purpose
      if (current) this.conn = undefined;
      this.disconnectEmitter.fire(conn);
      if (this.disposed || !current) return;
      if (!this.connection && !this.connecting) {
        this.setState("offline", { serverUrl: conn.url, problem: "The server went away; reconnecting." });
        this.scheduleRetry();
      }
    });
    this.setState("connected", { serverUrl: conn.url, welcome: w });
    this.connectEmitter.fire(conn);
  }

  private scheduleRetry(): void {
    if (this.disposed || this.retryTimer) return;
    const delay = this.retries.next();
    this.log.info(`Reconnecting in ${Math.round(delay / 1000)} s.`);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.disposed || this.connection || this.connecting) return;
      this.ensure(false).catch(() => undefined); // logged by connect()
    }, delay);
  }

  private clearRetry(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  private setState(state: ConnectionState, details: { serverUrl?: string; welcome?: Welcome; problem?: string }): void {
    const changed = state !== this.stateNow;
    this.stateNow = state;
    this.status.show(state, details);
    if (changed) {
      this.log.info(`Connection state: ${state}.`);
      this.stateEmitter.fire(state);
    }
  }

  /** Show a connection failure to the person (a refused token offers Set Server Token). */
  tellPerson(error: unknown): void {
    const message = describeError(error);
    if (error instanceof ConnectionFailed && error.kind === "unauthorized") {
      void vscode.window
        .showErrorMessage(`Apprentice: the server refused the token. Run "Apprentice: Set Server Token".`, SET_TOKEN, SHOW_LOG)
        .then((choice) => {
          if (choice === SET_TOKEN) void vscode.commands.executeCommand("apprentice.setToken");
          if (choice === SHOW_LOG) this.log.show();
        });
      return;
    }
    void vscode.window.showErrorMessage(`Apprentice: ${message}`, SHOW_LOG).then((choice) => {
      if (choice === SHOW_LOG) this.log.show();
    });
  }
}
