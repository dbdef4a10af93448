// A real `apprentice serve` for the extension's tests: the CLI as a person runs it, the
// embedded backend on a real model, a fresh APPRENTICE_HOME, no APPRENTICE_TOKEN (the token
// is read from <home>/token, as the extension does for a local server). `serve` does not
// migrate, so `apprentice db upgrade` runs first with the same environment. Used by
// realServer.real.ts; nothing here prints the token.

import { spawn, execFile, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";

export interface RealServerOptions {
  cli: string; // the `apprentice` executable
  home: string; // APPRENTICE_HOME (temp)
  modelDir: string; // APPRENTICE_MODEL_NAME for the embedded backend
  databaseUrl?: string; // APPRENTICE_DATABASE_URL; undefined: SQLite under the home
  readyTimeoutMs: number;
}

export interface RealServer {
  port: number;
  wsUrl: string;
  httpUrl: string;
  token: string;
  databaseUrl: string; // as the server uses it (the SQLite default spelled out)
  modelName: string; // what /healthz reports
  log(): string; // stdout + stderr so far
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null; killed: boolean }>;
}

const STOP_GRACE_MS = 15_000;

/** A free loopback port (the OS picks it; it is released again for the server to bind). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => (address && typeof address === "object" ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

/** The server's environment: this process's, minus every APPRENTICE_* (a person's token or
 * config must not leak in), plus the settings under test. */
function serverEnv(opts: RealServerOptions): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith("APPRENTICE_")) env[key] = value;
  env.APPRENTICE_HOME = opts.home;
  env.APPRENTICE_MODEL_BACKEND = "embedded";
  env.APPRENTICE_MODEL_NAME = opts.modelDir;
  if (opts.databaseUrl) env.APPRENTICE_DATABASE_URL = opts.databaseUrl;
  // Threads that spin while waiting crawl when other processes share the cores.
  env.OMP_WAIT_POLICY ??= "PASSIVE";
  return env;
}

async function waitHealthy(url: string, child: ChildProcess, deadline: number, log: () => string): Promise<{ model: string }> {
  let lastError = "no answer yet";
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`apprentice serve exited (${child.exitCode ?? child.signalCode}) before /healthz answered:\n${log()}`);
    }
    try {
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2000) });
      if (res.ok) return (await res.json()) as { model: string };
      lastError = `HTTP ${res.status}`;
    } catch (err) {
      lastError = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`apprentice serve gave no healthy /healthz in time (last: ${lastError}):\n${log()}`);
}

function stopper(child: ChildProcess): RealServer["stop"] {
  return () =>
    new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) {
        resolve({ code: child.exitCode, signal: child.signalCode, killed: false });
        return;
      }
      let killed = false;
      const timer = setTimeout(() => {
        killed = true;
        child.kill("SIGKILL");
      }, STOP_GRACE_MS);
      child.once("exit", (code, signal) => {
        clearTimeout(timer);
        resolve({ code, signal, killed });
      });
      child.kill("SIGTERM");
    });
}

/** Migrate the database, start `apprentice serve`, wait for /healthz, read the token.
 * On any failure the server is stopped before the error is thrown. */
export async function startRealServer(opts: RealServerOptions): Promise<RealServer> {
  if (!existsSync(opts.cli)) throw new Error(`${opts.cli} does not exist: set APPRENTICE_CLI or build the repo's .venv`);
  if (!existsSync(join(opts.modelDir, "config.json"))) {
    throw new Error(`${opts.modelDir} holds no model (config.json): set APPRENTICE_TEST_MODEL or run 'apprentice model build-dev --out ${opts.modelDir}'`);
  }
  const env = serverEnv(opts);
  try {
    await promisify(execFile)(opts.cli, ["db", "upgrade"], { env, timeout: 120_000 });
  } catch (err) {
    const e = err as { code?: number | string; stderr?: string; message: string };
    const why = e.stderr ? e.stderr.slice(-4000) : e.message; // the traceback's end says why
    throw new Error(`apprentice db upgrade failed (exit ${e.code ?? "?"}):\n${why}`);
  }
  const port = await freePort();
  const child = spawn(opts.cli, ["serve", "--host", "127.0.0.1", "--port", String(port)], { env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  const spawnError = new Promise<never>((_, reject) => child.once("error", (err) => reject(new Error(`cannot start ${opts.cli}: ${err.message}`))));
  const stop = stopper(child);
  const httpUrl = `http://127.0.0.1:${port}`;
  try {
    const health = await Promise.race([waitHealthy(httpUrl, child, Date.now() + opts.readyTimeoutMs, () => output), spawnError]);
    const tokenFile = join(opts.home, "token");
    const token = readFileSync(tokenFile, "utf8").trim();
    if (!token) throw new Error(`${tokenFile} is empty after the server started`);
    return {
      port,
      httpUrl,
      wsUrl: `ws://127.0.0.1:${port}/v1/ws`,
      token,
      databaseUrl: opts.databaseUrl ?? `sqlite:///${join(opts.home, "apprentice.db")}`,
      modelName: health.model,
      log: () => output,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
