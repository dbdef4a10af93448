// Workspace confinement: `resolveInWorkspace(root, relPath)` turns an agent-supplied path
// into a real absolute path inside the root, or throws ToolError saying why not (the same
// rules and codes as the server's ConfinedFS.resolve): absolute paths, `..` escapes and
// symlinks leading outside are path_outside_workspace; NUL, backslash, empty and over-long
// paths are invalid_path. Symlinks are resolved for the longest existing prefix, so a path
// to a file not yet created is checked through its existing parent directories.

import { promises as fs } from "node:fs";
import * as path from "node:path";
import { ToolError } from "./toolTypes";

const NAME_MAX = 255; // bytes per component
const PATH_MAX = 4000; // bytes for the whole relative path
const DRIVE = /^[A-Za-z]:/;

export interface ResolveOptions {
  allowRoot?: boolean; // "." and "" name the root itself (list_dir, search)
}

async function realpathOfLongestExisting(abs: string): Promise<string> {
  const tail: string[] = [];
  let current = abs;
  for (;;) {
    try {
      const real = await fs.realpath(current);
      return tail.length ? path.join(real, ...tail.reverse()) : real;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "ENOENT" && code !== "ENOTDIR") throw err;
      // A dangling symlink also gives ENOENT: refuse it rather than guess where it points.
      const stat = await fs.lstat(current).catch(() => undefined);
      if (stat?.isSymbolicLink()) {
        throw new ToolError("path_outside_workspace", `'${path.basename(current)}' is a symlink to nothing; refused.`);
      }
      const parent = path.dirname(current);
      if (parent === current) throw err;
      tail.push(path.basename(current));
      current = parent;
    }
  }
}

export async function resolveInWorkspace(root: string, relPath: string, opts: ResolveOptions = {}): Promise<string> {
  if (typeof relPath !== "string") {
    throw new ToolError("invalid_path", `A path must be a string, got ${typeof relPath}.`);
  }
  const shown = relPath.length <= 200 ? relPath : `${relPath.slice(0, 200)}...`;
  if (relPath.includes("\0")) throw new ToolError("invalid_path", "The path contains a NUL byte; use a plain relative path.");
  if (relPath.includes("\\")) throw new ToolError("invalid_path", `'${shown}' contains '\\'; separate directories with '/'.`);
  if (relPath.startsWith("/") || DRIVE.test(relPath) || relPath.startsWith("~")) {
    throw new ToolError(
      "path_outside_workspace",
      `'${shown}' is absolute; use a path relative to the workspace root, e.g. 'src/main.py' or '.'.`,
    );
  }
  const bytes = Buffer.byteLength(relPath, "utf8");
  if (bytes > PATH_MAX || relPath.split("/").some((p) => Buffer.byteLength(p, "utf8") > NAME_MAX)) {
    throw new ToolError("invalid_path", `'${shown}' is too long (names <= ${NAME_MAX} bytes).`);
  }
  const norm = relPath.trim() ? path.posix.normalize(relPath).replace(/\/$/, "") : "";
  if (norm === ".." || norm.startsWith("../")) {
    throw new ToolError("path_outside_workspace", `'${shown}' leaves the workspace; '..' cannot go above it.`);
  }
  if ((norm === "" || norm === ".") && !opts.allowRoot) {
    throw new ToolError("invalid_path", "The path is empty; name a file, e.g. 'README.md'.");
  }
  const realRoot = await fs.realpath(root);
  const real = await realpathOfLongestExisting(path.join(realRoot, relPath));
  const rel = path.relative(realRoot, real);
  if (rel === ".." || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel)) {
    throw new ToolError("path_outside_workspace", `'${shown}' resolves outside the workspace (through a symlink); refused.`);
  }
  return real;
}

/** The workspace-relative, '/'-separated form of a real path under the real root. */
export function relativeTo(realRoot: string, real: string): string {
  const rel = path.relative(realRoot, real);
  return rel === "" ? "." : rel.split(path.sep).join("/");
}
