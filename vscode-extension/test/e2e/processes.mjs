// Child processes for the end-to-end test: start, read a ready line, stop with timeouts.
// Every process is started in its own process group so stopping it also stops what it spawned
// (code-server forks an extension host and file watchers; they must not outlive the test).
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import net from "node:net";

/** Start `command args` detached (own process group); stdout/stderr go to logPath (truncated first). */
export function startProcess(name, command, args, { cwd, env, logPath }) {
  const child = spawn(command, args, { cwd, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  const log = createWriteStream(logPath, { flags: "w" });
  child.stdout.on("data", (chunk) => log.write(chunk));
  child.stderr.on("data", (chunk) => log.write(chunk));
  const exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => {
      log.end();
      resolve({ code, signal });
    });
    child.on("error", (error) => {
      log.end(`\n[e2e] could not start ${name}: ${error.message}\n`);
      resolve({ code: null, signal: null, error });
    });
  });
  return { name, child, exited, logPath };
}

/** The first stdout line of a process, parsed as JSON; fails if it exits or times out first. */
export function readJsonLine(proc, timeoutMs) {
  return new Promise((resolve, reject) => {
    let buffered = "";
    const timer = setTimeout(
      () => finish(new Error(`${proc.name} printed no ready line within ${timeoutMs / 1000} s (log: ${proc.logPath})`)),
      timeoutMs,
    );
    const onData = (chunk) => {
      buffered += chunk.toString("utf8");
      const newline = buffered.indexOf("\n");
      if (newline < 0) return;
      const line = buffered.slice(0, newline).trim();
      try {
        finish(undefined, JSON.parse(line));
      } catch {
        finish(new Error(`${proc.name} printed a ready line that is not JSON: ${line.slice(0, 200)}`));
      }
    };
    const onExit = ({ code, signal, error }) =>
      finish(new Error(`${proc.name} exited before it was ready (code ${code}, signal ${signal}` +
        `${error ? `, ${error.message}` : ""}); log: ${proc.logPath}`));
    function finish(error, value) {
      clearTimeout(timer);
      proc.child.stdout.off("data", onData);
      if (error) reject(error);
      else resolve(value);
    }
    proc.child.stdout.on("data", onData);
    proc.exited.then(onExit);
  });
}

/** Stop a process group: SIGTERM, then SIGKILL after graceMs. Never throws. */
export async function stopProcess(proc, graceMs = 5000) {
  if (!proc || proc.child.exitCode !== null || proc.child.signalCode !== null) return;
  const pid = proc.child.pid;
  if (pid === undefined) return;
  signalGroup(pid, "SIGTERM");
  const stopped = await Promise.race([proc.exited.then(() => true), sleep(graceMs).then(() => false)]);
  // Kill the group even when the leader exited: its children (extension host) may linger.
  signalGroup(pid, "SIGKILL");
  if (!stopped) await Promise.race([proc.exited, sleep(2000)]);
}

function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch (error) {
    if (error.code !== "ESRCH") process.stderr.write(`[e2e] ${signal} to group ${pid}: ${error.message}\n`);
  }
}

/** A TCP port that was free on 127.0.0.1 a moment ago. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Poll `check` (async, returns a truthy value when done) until it succeeds or timeoutMs passes. */
export async function waitFor(description, check, { timeoutMs, intervalMs = 250 }) {
  const deadline = Date.now() + timeoutMs;
  let lastError;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value) return value;
    } catch (error) {
      lastError = error;
    }
    await sleep(intervalMs);
  }
  throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${description}` +
    (lastError ? ` (last error: ${lastError.message})` : ""));
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Run `promise` but give up after ms; the rejection names what timed out. */
export function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} took more than ${ms / 1000} s`)), ms);
    }),
  ]);
}
