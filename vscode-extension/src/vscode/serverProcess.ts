// A local `apprentice serve` started by the extension (setting apprentice.autoStartServer) when
// the server URL is a loopback one and nothing answers: its output goes to the log, we wait for
// GET /healthz, and it is stopped when the extension deactivates.
import { ChildProcess, spawn } from "node:child_process";
import * as http from "node:http";
import * as https from "node:https";
import { healthUrl, serveArgs } from "../core/serverUrl";
import { Log, describeError } from "./log";

export class LocalServer {
  private child: ChildProcess | undefined;
  private exited = false;
  /** The last `error: ...` line the server printed: `apprentice serve` names what is missing there. */
  private lastError: string | undefined;

  private lastOutputAt = 0; // when the child last wrote to stderr (install progress, logs)

  constructor(private readonly log: Log) {}

  get running(): boolean {
    return this.child !== undefined && !this.exited;
  }

  /** Spawn `<command> serve --host H --port P` for `wsUrl` and wait until /healthz answers. */
  async start(command: string, wsUrl: string, timeoutMs = 120_000): Promise<void> {
    if (this.running) return this.waitHealthy(wsUrl, timeoutMs);
    const args = serveArgs(wsUrl);
    this.log.info(`Starting a local server: ${command} ${args.join(" ")}`);
    this.exited = false;
    this.lastError = undefined;
    let spawnError: Error | undefined;
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], env: process.env });
    this.child = child;
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => this.log.raw("[server]", chunk));
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      this.lastOutputAt = Date.now();
      this.log.raw("[server]", chunk);
      const errors = chunk.split(/\r?\n/).filter((line) => line.startsWith("error: "));
      if (errors.length > 0) this.lastError = errors[errors.length - 1].slice("error: ".length);
    });
    child.on("error", (error) => {
      spawnError = error;
      this.exited = true;
      this.log.error(`Could not start "${command}" (set apprentice.serverCommand to the apprentice executable)`, error);
    });
    child.on("exit", (code, signal) => {
      this.exited = true;
      this.log.info(`The local server exited (${signal ? `signal ${signal}` : `code ${code}`}).`);
    });
    await this.waitHealthy(wsUrl, timeoutMs, () => {
      if (spawnError) return `"${command}" could not be started: ${spawnError.message}`;
      if (this.exited && this.lastError) return `"${command} serve" could not start: ${this.lastError}`;
      if (this.exited) return `"${command} serve" exited before it answered; see the Apprentice log.`;
      return undefined;
    });
    this.log.info("The local server is up.");
  }

  /** Poll GET /healthz every 250 ms until it answers 200, `failed()` says why not, or time runs out.
   * The time counts from the server's last output: a first start installs the model for minutes
   * while printing its progress; a server silent for `timeoutMs` is stuck. */
  async waitHealthy(wsUrl: string, timeoutMs: number, failed: () => string | undefined = () => undefined): Promise<void> {
    const target = healthUrl(wsUrl);
    const started = Date.now();
    for (;;) {
      const reason = failed();
      if (reason) throw new Error(reason);
      if (await healthy(target)) return;
      if (Date.now() > Math.max(started, this.lastOutputAt) + timeoutMs) throw new Error(`The local server did not answer ${target} and printed nothing for ${Math.round(timeoutMs / 1000)} s.`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /** SIGTERM, then SIGKILL if it is still there after `graceMs`. */
  async stop(graceMs = 5000): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || this.exited || child.exitCode !== null) return;
    this.log.info("Stopping the local server.");
    const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    try {
      child.kill("SIGTERM");
    } catch (error) {
      this.log.error("Could not stop the local server", error);
      return;
    }
    const timer = setTimeout(() => {
      try {
        child.kill("SIGKILL");
      } catch (error) {
        this.log.error("Could not kill the local server", describeError(error));
      }
    }, graceMs);
    await Promise.race([gone, new Promise((resolve) => setTimeout(resolve, graceMs + 1000))]);
    clearTimeout(timer);
  }
}

/** One GET: true on HTTP 200 within 2 s. */
export function healthy(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const get = url.startsWith("https:") ? https.get : http.get;
    const req = get(url, { timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
  });
}
