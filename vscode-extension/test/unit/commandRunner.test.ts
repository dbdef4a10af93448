// Unit tests of src/core/commandRunner.ts with real processes: exit codes, interleaved output
// streamed to onOutput, the timeout killing the whole process group, the output cap, and a
// scrubbed environment.

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { runCommand, scrubbedEnv, shellQuote } from "../../src/core/commandRunner";
import { ToolError } from "../../src/core/tools";
import { sleep, tempDir } from "./helpers";

test("runs in cwd through /bin/sh, reports the exit code and streams output", async () => {
  const dir = tempDir();
  try {
    const chunks: string[] = [];
    const r = await runCommand({ command: "pwd; echo err >&2; exit 3", cwd: dir.path, timeoutS: 10, outputCapBytes: 10_000, onOutput: (c) => chunks.push(c) });
    assert.equal(r.exit_code, 3);
    assert.equal(r.timed_out, false);
    assert.equal(r.truncated, false);
    assert.match(r.output, /apprentice-test-.*\n/);
    assert.match(r.output, /err\n/);
    assert.equal(chunks.join(""), r.output);
  } finally {
    dir.cleanup();
  }
});

test("a timeout kills the process group, background children included", async () => {
  const dir = tempDir();
  try {
    const marker = join(dir.path, "survived");
    const started = Date.now();
    const r = await runCommand({ command: `(sleep 2; touch ${marker}) & sleep 30`, cwd: dir.path, timeoutS: 0.5, outputCapBytes: 1000 });
    assert.ok(Date.now() - started < 5000, "returned soon after the timeout");
    assert.equal(r.timed_out, true);
    assert.equal(r.exit_code, null);
    assert.match(r.output, /killed after the 0.5 s timeout/);
    await sleep(2500);
    assert.equal(existsSync(marker), false, "the background child was killed too");
  } finally {
    dir.cleanup();
  }
});

test("output over the cap keeps head and tail and says how much was omitted", async () => {
  const r = await runCommand({ command: "printf 'HEAD'; head -c 5000 /dev/zero | tr '\\0' x; printf 'TAIL'", cwd: "/", timeoutS: 10, outputCapBytes: 100 });
  assert.equal(r.truncated, true);
  assert.equal(r.exit_code, 0);
  assert.ok(r.output.startsWith("HEAD"), r.output.slice(0, 10));
  assert.ok(r.output.endsWith("TAIL"), r.output.slice(-10));
  assert.match(r.output, /\[\.\.\. 4908 bytes of output omitted \.\.\.\]/);
});

test("secrets stay out of the environment; empty commands and bad timeouts are refused", async () => {
  const env = scrubbedEnv({ PATH: "/bin", APPRENTICE_TOKEN: "t", GITHUB_TOKEN: "g", MY_PASSWORD: "p", HOME: "/h" });
  assert.deepEqual(env, { PATH: "/bin", HOME: "/h", PAGER: "cat", GIT_PAGER: "cat", GIT_TERMINAL_PROMPT: "0" });
  const r = await runCommand({ command: "echo ${APPRENTICE_TOKEN:-none}", cwd: "/", timeoutS: 5, outputCapBytes: 100, env });
  assert.equal(r.output, "none\n");
  await assert.rejects(runCommand({ command: "  ", cwd: "/", timeoutS: 5, outputCapBytes: 100 }), (e: unknown) => e instanceof ToolError && e.code === "command_error");
  await assert.rejects(runCommand({ command: "true", cwd: "/", timeoutS: 0, outputCapBytes: 100 }), /timeout must be > 0/);
  await assert.rejects(runCommand({ command: "true", cwd: "/does/not/exist", timeoutS: 5, outputCapBytes: 100 }), /could not start/);
});

test("shellQuote keeps arguments whole", async () => {
  const r = await runCommand({ command: shellQuote(["printf", "%s|", "a b", "it's", "$HOME"]), cwd: "/", timeoutS: 5, outputCapBytes: 100 });
  assert.equal(r.output, "a b|it's|$HOME|");
});
