// Running one approved command for the agent: `/bin/sh -c` in its own process group (so a
// timeout kills everything it started), stdout and stderr interleaved, the kept output capped
// (head and tail, like the server's LocalWorkspace: errors are usually at the end), chunks
// streamed to `onOutput` for a terminal. Secrets are not passed on in the environment.

import { spawn } from "node:child_process";
import { constants as osConstants } from "node:os";
import type { CommandResult } from "./toolTypes";
import { ToolError } from "./toolTypes";

export interface RunOptions {
  command: string;
  cwd: string;
  timeoutS: number;
  outputCapBytes: number;
  onOutput?: (chunk: string) => void;
  env?: NodeJS.ProcessEnv; // default: this process's, scrubbed
}

const SECRET_MARKERS = ["TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "CREDENTIAL"];
// Non-interactive defaults: nothing may wait for a terminal or a pager.
const QUIET_ENV = { PAGER: "cat", GIT_PAGER: "cat", GIT_TERMINAL_PROMPT: "0" };

/** The environment minus APPRENTICE_* and anything that looks like a secret. */
export function scrubbedEnv(base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(base)) {
    if (k.startsWith("APPRENTICE_") || SECRET_MARKERS.some((m) => k.toUpperCase().includes(m))) continue;
    env[k] = v;
  }
  return { ...env, ...QUIET_ENV };
}

/** POSIX-shell quoting of an argv (for run_command's list form). */
export function shellQuote(argv: string[]): string {
  return argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'"'"'`)}'`)).join(" ");
}

/** Keeps the first and last cap/2 bytes of a stream and counts the rest. */
class CappedOutput {
  private head = Buffer.alloc(0);
  private tail: Buffer[] = [];
  private tailBytes = 0;
  total = 0;

  constructor(private readonly cap: number) {}

  add(chunk: Buffer): void {
    this.total += chunk.length;
    const room = Math.floor(this.cap / 2) - this.head.length;
    if (room > 0) {
      this.head = Buffer.concat([this.head, chunk.subarray(0, room)]);
      chunk = chunk.subarray(room);
    }
    if (!chunk.length) return;
    this.tail.push(chunk);
    this.tailBytes += chunk.length;
    const keep = this.cap - Math.floor(this.cap / 2);
    if (this.tailBytes > keep) {
      const joined = Buffer.concat(this.tail);
      this.tail = [joined.subarray(joined.length - keep)];
      this.tailBytes = keep;
    }
  }

  get truncated(): boolean {
    return this.total > this.cap;
  }

  text(): string {
    const tail = Buffer.concat(this.tail);
    if (!this.truncated) return Buffer.concat([this.head, tail]).toString("utf8");
    const omitted = this.total - this.head.length - tail.length;
    return `${this.head.toString("utf8")}\n[... ${omitted} bytes of output omitted ...]\n${tail.toString("utf8")}`;
  }
}

export function runCommand(opts: RunOptions): Promise<CommandResult> {
  if (!opts.command.trim()) {
    return Promise.reject(new ToolError("command_error", "The command is empty; give a program and its arguments."));
  }
  if (!(opts.timeoutS > 0)) {
    return Promise.reject(new ToolError("command_error", `The timeout must be > 0 seconds, got ${opts.timeoutS}.`));
  }
  const cap = Math.max(1, Math.floor(opts.outputCapBytes));
  return new Promise<CommandResult>((resolve, reject) => {
    const child = spawn("/bin/sh", ["-c", opts.command], {
      cwd: opts.cwd,
      env: opts.env ?? scrubbedEnv(),
      stdio: ["ignore", "pipe", "pipe"],
      detached: true, // its own process group, killed as a whole
    });
    const out = new CappedOutput(cap);
    let timedOut = false;
    let done = false;
    let exitCode: number | null = null;
    let exitSignal: NodeJS.Signals | null = null;
    const killGroup = () => {
      try {
        if (child.pid) process.kill(-child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, opts.timeoutS * 1000);
    const take = (chunk: Buffer) => {
      out.add(chunk);
      opts.onOutput?.(chunk.toString("utf8"));
    };
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    child.on("error", (err) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      reject(new ToolError("command_error", `The command could not start: ${err.message}.`));
    });
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      let text = out.text();
      if (timedOut) text += `\n[killed after the ${opts.timeoutS} s timeout]\n`;
      const exit = timedOut ? null : exitCode ?? (exitSignal ? -(osConstants.signals[exitSignal] ?? 1) : null);
      resolve({ exit_code: exit, output: text, timed_out: timedOut, truncated: out.truncated });
    };
    child.on("exit", (code, signal) => {
      exitCode = code;
      exitSignal = signal;
      clearTimeout(timer);
      killGroup(); // also on success: background children of the command die with it
      // A grandchild that left the group may still hold the pipes; do not wait for it long.
      setTimeout(finish, 2000).unref();
    });
    child.on("close", finish);
  });
}
