// `FsWorkspaceTools`: the agent's five workspace tools on node:fs, confined to one root
// (confine.ts), with the limits and error codes of the server's LocalWorkspace
// (agent_server/agent/workspace.py). Listing and search never follow symlinks and skip .git,
// node_modules and the other DEFAULT_IGNORE names; writes are atomic (temp file + rename).

import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import * as path from "node:path";
import { runCommand, scrubbedEnv } from "./commandRunner";
import { relativeTo, resolveInWorkspace } from "./confine";
import { splitLines } from "./lines";
import {
  ToolError,
  type CommandResult,
  type DirEntry,
  type EntryKind,
  type Listing,
  type SearchMatch,
  type SearchResult,
  type WorkspaceTools,
} from "./toolTypes";

export const DEFAULT_IGNORE: ReadonlySet<string> = new Set([
  ".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache",
  ".ruff_cache", ".tox",
]);

export interface FsWorkspaceOptions {
  maxFileBytes?: number; // read/write refuse larger files; default 1000000
  listLimit?: number; // default and ceiling of list_dir's limit; 500
  listMaxDepth?: number; // 10
  searchMaxResults?: number; // default and ceiling of max_results; 200
  searchMaxFiles?: number; // files one search reads at most; 20000
  searchLineChars?: number; // longer matching lines are shortened; 400
  ignoreNames?: ReadonlySet<string>;
  maxCommandTimeoutS?: number; // an upper bound on what the server asks for
  onCommandOutput?: (chunk: string) => void;
}

function fsError(err: unknown, shown: string): ToolError {
  const code = (err as NodeJS.ErrnoException).code;
  switch (code) {
    case "ENOENT":
      return new ToolError("file_not_found", `'${shown}' does not exist. Use list_dir to see what is there.`);
    case "ENOTDIR":
      return new ToolError("not_a_directory", `A part of '${shown}' is a file, not a directory.`);
    case "EISDIR":
      return new ToolError("not_a_file", `'${shown}' is a directory; use list_dir to see its contents.`);
    case "EACCES":
    case "EPERM":
    case "EROFS":
      return new ToolError("permission_denied", `Permission denied for '${shown}'.`);
    case "ELOOP":
      return new ToolError("path_outside_workspace", `'${shown}' goes through a symlink; it was refused.`);
    default:
      return err instanceof ToolError ? err : new ToolError("workspace_error", `'${shown}': ${(err as Error).message}.`);
  }
}

function kindOf(st: import("node:fs").Stats): EntryKind {
  if (st.isSymbolicLink()) return "symlink";
  if (st.isDirectory()) return "dir";
  return st.isFile() ? "file" : "other";
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

function decode(data: Buffer, shown: string): string {
  if (data.subarray(0, 8192).includes(0)) {
    throw new ToolError("binary_file", `'${shown}' is a binary file; only text files can be read or edited.`);
  }
  try {
    return utf8.decode(data);
  } catch {
    throw new ToolError("binary_file", `'${shown}' is not UTF-8 text; it cannot be read or edited.`);
  }
}

function clamp(value: number | null, fallback: number, ceiling: number): number {
  const v = value === null || !Number.isFinite(value) || value < 1 ? fallback : Math.floor(value);
  return Math.min(Math.max(v, 1), ceiling);
}

export class FsWorkspaceTools implements WorkspaceTools {
  readonly maxFileBytes: number;
  readonly listLimit: number;
  readonly listMaxDepth: number;
  readonly searchMaxResults: number;
  readonly searchMaxFiles: number;
  readonly searchLineChars: number;
  readonly ignoreNames: ReadonlySet<string>;

  constructor(
    readonly root: string,
    private readonly opts: FsWorkspaceOptions = {},
  ) {
    this.maxFileBytes = opts.maxFileBytes ?? 1_000_000;
    this.listLimit = opts.listLimit ?? 500;
    this.listMaxDepth = opts.listMaxDepth ?? 10;
    this.searchMaxResults = opts.searchMaxResults ?? 200;
    this.searchMaxFiles = opts.searchMaxFiles ?? 20_000;
    this.searchLineChars = opts.searchLineChars ?? 400;
    this.ignoreNames = opts.ignoreNames ?? DEFAULT_IGNORE;
  }

  /** The real absolute path of a workspace-relative one (throws ToolError). */
  resolve(relPath: string, allowRoot = false): Promise<string> {
    return resolveInWorkspace(this.root, relPath, { allowRoot });
  }

  async readFile(relPath: string): Promise<string> {
    const abs = await this.resolve(relPath);
    return decode(await this.readBytes(abs, relPath), relPath);
  }

  private async readBytes(abs: string, shown: string): Promise<Buffer> {
    let st;
    try {
      st = await fs.stat(abs);
    } catch (err) {
      throw fsError(err, shown);
    }
    if (st.isDirectory()) throw new ToolError("not_a_file", `'${shown}' is a directory; use list_dir to see its contents.`);
    if (!st.isFile()) throw new ToolError("not_a_file", `'${shown}' is not a regular file (a device, FIFO or socket).`);
    if (st.size > this.maxFileBytes) {
      throw new ToolError(
        "file_too_large",
        `'${shown}' has ${st.size} bytes, over the ${this.maxFileBytes}-byte limit; use search to find the lines you need.`,
      );
    }
    try {
      const data = await fs.readFile(abs);
      if (data.length > this.maxFileBytes) throw new ToolError("file_too_large", `'${shown}' is over the ${this.maxFileBytes}-byte limit.`);
      return data;
    } catch (err) {
      throw fsError(err, shown);
    }
  }

  async writeFile(relPath: string, text: string): Promise<boolean> {
    if (typeof text !== "string") throw new ToolError("invalid_path", `The new text of '${relPath}' must be a string.`);
    const abs = await this.resolve(relPath);
    let old: import("node:fs").Stats | undefined;
    try {
      old = await fs.lstat(abs);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw fsError(err, relPath);
    }
    if (old && !old.isFile()) throw new ToolError("not_a_file", `'${relPath}' exists and is not a regular file.`);
    if (old && old.size <= this.maxFileBytes) {
      // Keep the file's line endings when the agent wrote plain "\n".
      const before = await fs.readFile(abs, "utf8").catch(() => "");
      if (before.includes("\r\n") && !text.includes("\r\n")) text = text.replace(/\n/g, "\r\n");
    }
    const data = Buffer.from(text, "utf8");
    if (data.length > this.maxFileBytes) {
      throw new ToolError("file_too_large", `The new text has ${data.length} bytes, over the ${this.maxFileBytes}-byte limit.`);
    }
    const dir = path.dirname(abs);
    const tmp = path.join(dir, `.apprentice-${randomBytes(6).toString("hex")}.tmp`);
    try {
      await fs.mkdir(dir, { recursive: true });
      await fs.writeFile(tmp, data, { flag: "wx", mode: old ? old.mode & 0o7777 : 0o666 });
      if (old) await fs.chmod(tmp, old.mode & 0o7777);
      await fs.rename(tmp, abs);
    } catch (err) {
      await fs.unlink(tmp).catch(() => undefined);
      throw fsError(err, relPath);
    }
    return old === undefined;
  }

  async listDir(relPath: string, depth: number, limit: number | null): Promise<Listing> {
    const maxDepth = clamp(depth, 1, this.listMaxDepth);
    const cap = clamp(limit, this.listLimit, this.listLimit);
    const abs = await this.resolve(relPath, true);
    await this.requireDir(abs, relPath);
    const realRoot = await fs.realpath(this.root);
    const entries: DirEntry[] = [];
    let truncated = false;
    for await (const item of this.walk(abs, realRoot, maxDepth)) {
      if (entries.length >= cap) {
        truncated = true;
        break;
      }
      entries.push({ path: item.rel, kind: item.kind, size: item.kind === "file" ? item.size : null });
    }
    return { entries, truncated };
  }

  async search(pattern: string, relPath: string, regex: boolean, maxResults: number | null): Promise<SearchResult> {
    if (typeof pattern !== "string" || !pattern || pattern.includes("\0")) {
      throw new ToolError("invalid_pattern", "The search pattern is empty; give the text to look for.");
    }
    let rx: RegExp;
    try {
      rx = new RegExp(regex ? pattern : pattern.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&"));
    } catch (err) {
      throw new ToolError(
        "invalid_pattern",
        `The regex does not compile: ${(err as Error).message}. Search for plain text with regex=false.`,
      );
    }
    const cap = clamp(maxResults, this.searchMaxResults, this.searchMaxResults);
    const abs = await this.resolve(relPath, true);
    const realRoot = await fs.realpath(this.root);
    const matches: SearchMatch[] = [];
    for await (const file of this.textFiles(abs, realRoot, relPath)) {
      if (file === undefined) return { matches, truncated: true }; // searchMaxFiles reached
      const lines = splitLines(file.data.toString("utf8"));
      for (let i = 0; i < lines.length; i++) {
        if (!rx.test(lines[i].slice(0, 4 * this.searchLineChars))) continue;
        if (matches.length >= cap) return { matches, truncated: true };
        matches.push({ path: file.rel, line: i + 1, text: lines[i].slice(0, this.searchLineChars) });
      }
    }
    return { matches, truncated: false };
  }

  async runCommand(command: string, timeoutS: number, outputCapBytes: number): Promise<CommandResult> {
    const ceiling = this.opts.maxCommandTimeoutS;
    const timeout = ceiling !== undefined && timeoutS > ceiling ? ceiling : timeoutS;
    return runCommand({
      command,
      cwd: await fs.realpath(this.root),
      timeoutS: timeout,
      outputCapBytes,
      env: scrubbedEnv(),
      onOutput: this.opts.onCommandOutput,
    });
  }

  private async requireDir(abs: string, shown: string): Promise<void> {
    let st;
    try {
      st = await fs.lstat(abs);
    } catch (err) {
      throw fsError(err, shown);
    }
    if (!st.isDirectory()) throw new ToolError("not_a_directory", `'${shown}' is not a directory; use read_file for a file.`);
  }

  /** Entries under `dir`, depth-first in name order; symlinks reported, never followed. */
  private async *walk(
    dir: string,
    realRoot: string,
    maxDepth: number,
    depth = 1,
  ): AsyncGenerator<{ rel: string; abs: string; kind: EntryKind; size: number }> {
    let names: string[];
    try {
      names = (await fs.readdir(dir)).sort();
    } catch {
      return; // unreadable directory: skip it, as grep -r does
    }
    for (const name of names) {
      if (this.ignoreNames.has(name)) continue;
      const abs = path.join(dir, name);
      let st;
      try {
        st = await fs.lstat(abs);
      } catch {
        continue;
      }
      const kind = kindOf(st);
      yield { rel: relativeTo(realRoot, abs), abs, kind, size: st.size };
      if (kind === "dir" && depth < maxDepth) yield* this.walk(abs, realRoot, maxDepth, depth + 1);
    }
  }

  /** Text files to search (binary and oversized ones skipped); undefined when over the cap. */
  private async *textFiles(abs: string, realRoot: string, shown: string): AsyncGenerator<{ rel: string; data: Buffer } | undefined> {
    let st;
    try {
      st = await fs.lstat(abs);
    } catch (err) {
      throw fsError(err, shown);
    }
    if (st.isFile()) {
      const data = await this.readBytes(abs, shown);
      if (!data.subarray(0, 8192).includes(0)) yield { rel: relativeTo(realRoot, abs), data };
      return;
    }
    let count = 0;
    for await (const item of this.walk(abs, realRoot, 100)) {
      if (item.kind !== "file") continue;
      if (++count > this.searchMaxFiles) {
        yield undefined;
        return;
      }
      if (item.size > this.maxFileBytes) continue;
      const data = await fs.readFile(item.abs).catch(() => undefined);
      if (data && !data.subarray(0, 8192).includes(0)) yield { rel: item.rel, data };
    }
  }
}
