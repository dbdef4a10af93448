// Workspace-relative paths for the first workspace folder, the only root the agent may touch:
// uri <-> relative path, with confinement left to core resolveInWorkspace for anything the
// server sends.
import * as path from "node:path";
import * as vscode from "vscode";
import { ToolError } from "../core/tools";

export function workspaceRoot(): vscode.Uri | undefined {
  return vscode.workspace.workspaceFolders?.[0]?.uri;
}

/** The root as a local path, or a ToolError the server understands. */
export function requireRootPath(): string {
  const root = workspaceRoot();
  if (!root || root.scheme !== "file") {
    throw new ToolError("workspace_error", "No folder is open in the editor; open the project folder first.");
  }
  return root.fsPath;
}

/** The '/'-separated path of `uri` relative to the root, or undefined when it is outside. */
export function relativePath(uri: vscode.Uri): string | undefined {
  const root = workspaceRoot();
  if (!root || uri.scheme !== "file" || root.scheme !== "file") return undefined;
  const rel = path.relative(root.fsPath, uri.fsPath);
  if (!rel || rel.startsWith("..") || path.isAbsolute(rel)) return undefined;
  return rel.split(path.sep).join("/");
}

/** The open document for a local absolute path, if any (possibly with unsaved changes). */
export function openDocument(absPath: string): vscode.TextDocument | undefined {
  const wanted = path.resolve(absPath);
  return vscode.workspace.textDocuments.find((d) => d.uri.scheme === "file" && path.resolve(d.uri.fsPath) === wanted);
}
