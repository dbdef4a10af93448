// Unit tests of src/core/confine.ts, fsTools.ts and tools.ts on real temp directories:
// confinement (absolute, `..`, symlinks out), the five tools with their wire results and
// error codes, and answerToolRequest's {result} / {error} replies.

import assert from "node:assert/strict";
import { mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync, chmodSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { FsWorkspaceTools, ToolError, answerToolRequest, resolveInWorkspace } from "../../src/core/tools";
import { tempDir } from "./helpers";

let ws: { path: string; cleanup: () => void };
let outside: { path: string; cleanup: () => void };
let tools: FsWorkspaceTools;

before(() => {
  ws = tempDir("apprentice-ws-");
  outside = tempDir("apprentice-outside-");
  writeFileSync(join(outside.path, "secret.txt"), "top secret\n");
  mkdirSync(join(ws.path, "src/pkg"), { recursive: true });
  mkdirSync(join(ws.path, ".git"));
  mkdirSync(join(ws.path, "node_modules/dep"), { recursive: true });
  writeFileSync(join(ws.path, ".git/config"), "needle in git\n");
  writeFileSync(join(ws.path, "node_modules/dep/index.js"), "needle in deps\n");
  writeFileSync(join(ws.path, "a.py"), "x = 1\nneedle = 'a'\n");
  writeFileSync(join(ws.path, "src/pkg/b.py"), "def f():\n    return 'needle'\n");
  writeFileSync(join(ws.path, "src/crlf.txt"), "one\r\ntwo\r\n");
  writeFileSync(join(ws.path, "bin.dat"), Buffer.from([1, 0, 2, 110, 101, 101, 100, 108, 101]));
  writeFileSync(join(ws.path, "latin1.txt"), Buffer.from([0x63, 0x61, 0x66, 0xe9]));
  symlinkSync(outside.path, join(ws.path, "escape"));
  symlinkSync(join(outside.path, "secret.txt"), join(ws.path, "secret-link"));
  symlinkSync("a.py", join(ws.path, "inside-link"));
  tools = new FsWorkspaceTools(ws.path, { maxFileBytes: 1000 });
});

after(() => {
  ws.cleanup();
  outside.cleanup();
});

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof ToolError, String(err));
    return (err as ToolError).code;
  }
  return "ok";
}

test("resolveInWorkspace refuses absolute paths, .. escapes and symlinks leading outside", async () => {
  assert.equal(await code(resolveInWorkspace(ws.path, "/etc/passwd")), "path_outside_workspace");
  assert.equal(await code(resolveInWorkspace(ws.path, "~/x")), "path_outside_workspace");
  assert.equal(await code(resolveInWorkspace(ws.path, "../x")), "path_outside_workspace");
  assert.equal(await code(resolveInWorkspace(ws.path, "src/../../x")), "path_outside_workspace");
  assert.equal(await code(resolveInWorkspace(ws.path, "escape/secret.txt")), "path_outside_workspace");
  assert.equal(await code(resolveInWorkspace(ws.path, "escape/new-file.txt")), "path_outside_workspace");
  assert.equal(await code(resolveInWorkspace(ws.path, "secret-link")), "path_outside_workspace");
  assert.equal(await code(resolveInWorkspace(ws.path, "a\\b")), "invalid_path");
  assert.equal(await code(resolveInWorkspace(ws.path, "a\0b")), "invalid_path");
  assert.equal(await code(resolveInWorkspace(ws.path, "")), "invalid_path");
  assert.equal(await code(resolveInWorkspace(ws.path, "x".repeat(300))), "invalid_path");
  await assert.rejects(resolveInWorkspace(ws.path, "/etc/passwd"), /is absolute; use a path relative to the workspace root/);
});

test("resolveInWorkspace accepts paths inside, new files, and symlinks that stay inside", async () => {
  assert.equal(await resolveInWorkspace(ws.path, "src/../a.py"), join(ws.path, "a.py"));
  assert.equal(await resolveInWorkspace(ws.path, "inside-link"), join(ws.path, "a.py"));
  assert.equal(await resolveInWorkspace(ws.path, "new/dir/file.py"), join(ws.path, "new/dir/file.py"));
  assert.equal(await resolveInWorkspace(ws.path, ".", { allowRoot: true }), ws.path);
});

test("readFile: text, and the error codes of the server's LocalWorkspace", async () => {
  assert.equal(await tools.readFile("a.py"), "x = 1\nneedle = 'a'\n");
  assert.equal(await code(tools.readFile("missing.py")), "file_not_found");
  assert.equal(await code(tools.readFile("src")), "not_a_file");
  assert.equal(await code(tools.readFile("a.py/x")), "not_a_directory");
  assert.equal(await code(tools.readFile("bin.dat")), "binary_file");
  assert.equal(await code(tools.readFile("latin1.txt")), "binary_file");
  assert.equal(await code(tools.readFile("escape/secret.txt")), "path_outside_workspace");
  writeFileSync(join(ws.path, "big.txt"), "x".repeat(1001));
  await assert.rejects(tools.readFile("big.txt"), /1001 bytes, over the 1000-byte limit/);
});

test("writeFile: creates parents, reports created, keeps CRLF and the mode, refuses outside", async () => {
  assert.equal(await tools.writeFile("new/deep/c.py", "print(1)\n"), true);
  assert.equal(readFileSync(join(ws.path, "new/deep/c.py"), "utf8"), "print(1)\n");
  assert.equal(await tools.writeFile("new/deep/c.py", "print(2)\n"), false);
  assert.equal(await tools.writeFile("src/crlf.txt", "one\nTWO\n"), false);
  assert.equal(readFileSync(join(ws.path, "src/crlf.txt"), "utf8"), "one\r\nTWO\r\n");
  chmodSync(join(ws.path, "new/deep/c.py"), 0o755);
  await tools.writeFile("new/deep/c.py", "print(3)\n");
  assert.equal(statSync(join(ws.path, "new/deep/c.py")).mode & 0o777, 0o755);
  assert.equal(await code(tools.writeFile("escape/evil.txt", "x")), "path_outside_workspace");
  assert.equal(await code(tools.writeFile("../evil.txt", "x")), "path_outside_workspace");
  assert.equal(await code(tools.writeFile("src", "x")), "not_a_file");
  assert.equal(await code(tools.writeFile("huge.txt", "y".repeat(1001))), "file_too_large");
});

test("listDir: sorted, depth-limited, symlinks listed not followed, .git and node_modules skipped, limit", async () => {
  const top = await tools.listDir(".", 1, null);
  const names = top.entries.map((e) => e.path);
  assert.ok(!names.includes(".git") && !names.includes("node_modules"), names.join(","));
  assert.deepEqual(names, [...names].sort());
  assert.deepEqual(top.entries.find((e) => e.path === "a.py"), { path: "a.py", kind: "file", size: 19 });
  assert.deepEqual(top.entries.find((e) => e.path === "escape"), { path: "escape", kind: "symlink", size: null });
  assert.deepEqual(top.entries.find((e) => e.path === "src"), { path: "src", kind: "dir", size: null });
  assert.equal(top.truncated, false);
  const deep = await tools.listDir("src", 3, null);
  assert.deepEqual(deep.entries.map((e) => e.path), ["src/crlf.txt", "src/pkg", "src/pkg/b.py"]);
  const limited = await tools.listDir(".", 5, 2);
  assert.equal(limited.entries.length, 2);
  assert.equal(limited.truncated, true);
  assert.equal(await code(tools.listDir("a.py", 1, null)), "not_a_directory");
  assert.equal(await code(tools.listDir("nope", 1, null)), "file_not_found");
});

test("search: literal and regex, 1-based lines, skips binary/ignored/outside, max results, bad regex", async () => {
  const found = await tools.search("needle", ".", false, null);
  assert.deepEqual(found.matches, [
    { path: "a.py", line: 2, text: "needle = 'a'" },
    { path: "src/pkg/b.py", line: 2, text: "    return 'needle'" },
  ]);
  assert.equal(found.truncated, false);
  assert.deepEqual((await tools.search("n(e)+dle = ", ".", true, null)).matches.map((m) => m.path), ["a.py"]);
  assert.deepEqual((await tools.search("(e)+", ".", false, null)).matches, [], "literal: parentheses are text");
  assert.deepEqual((await tools.search("needle", "src/pkg/b.py", false, null)).matches.length, 1);
  const one = await tools.search("needle", ".", false, 1);
  assert.equal(one.matches.length, 1);
  assert.equal(one.truncated, true);
  assert.equal(await code(tools.search("(", ".", true, null)), "invalid_pattern");
  assert.equal(await code(tools.search("", ".", false, null)), "invalid_pattern");
  assert.equal(await code(tools.search("secret", "escape", false, null)), "path_outside_workspace");
});

test("answerToolRequest: wire results and errors, unknown method, bad params", async () => {
  assert.deepEqual(await answerToolRequest(tools, "read_file", { path: "a.py" }), { result: { text: "x = 1\nneedle = 'a'\n" } });
  assert.deepEqual(await answerToolRequest(tools, "write_file", { path: "w.txt", text: "hi" }), { result: { created: true } });
  const listed = await answerToolRequest(tools, "list_dir", { path: "src", depth: 1, limit: null });
  assert.deepEqual(listed, { result: { entries: [{ path: "src/crlf.txt", kind: "file", size: 10 }, { path: "src/pkg", kind: "dir", size: null }], truncated: false } });
  const searched = await answerToolRequest(tools, "search", { pattern: "x = 1", path: ".", regex: false, max_results: null });
  assert.deepEqual(searched, { result: { matches: [{ path: "a.py", line: 1, text: "x = 1" }], truncated: false } });
  const ran = await answerToolRequest(tools, "run_command", { command: ["echo", "it's here"], shell: false, timeout_s: 10, output_cap_bytes: 1000 });
  assert.deepEqual(ran, { result: { exit_code: 0, output: "it's here\n", timed_out: false, truncated: false } });
  const missing = await answerToolRequest(tools, "read_file", { path: "missing.py" });
  assert.ok("error" in missing && missing.error.code === "file_not_found" && /does not exist/.test(missing.error.message));
  assert.deepEqual(await answerToolRequest(tools, "delete_everything", {}), {
    error: { code: "unknown_method", message: "Unknown method 'delete_everything'; known: read_file, list_dir, search, write_file, run_command." },
  });
  const bad = await answerToolRequest(tools, "read_file", { path: 3 });
  assert.deepEqual(bad, { error: { code: "invalid_request", message: "The parameter 'path' must be a string, got number." } });
  const none = await answerToolRequest(tools, "write_file", { path: "x" });
  assert.deepEqual(none, { error: { code: "invalid_request", message: "The parameter 'text' is missing." } });
});
