// The agent's workspace tools inside VS Code: read_file answers from an open (possibly unsaved)
// document first, else disk; write_file is one undoable WorkspaceEdit replacing the whole
// document, then saved; list_dir and search are core FsWorkspaceTools on the first workspace
// folder; run_command asks the person (unless already approved) and runs with its output live
// in the "Apprentice" terminal. Every path is confined to the workspace folder. Whether a
// write_file may happen at all (the person may have changed the file since the agent read it)
// is the session's WriteGuard's decision (core/writeGuard.ts); unsavedText feeds it.
import * as path from "node:path";
import * as vscode from "vscode";
import { runCommand } from "../core/commandRunner";
import {
  FsWorkspaceTools,
  ToolError,
  resolveInWorkspace,
  type CommandResult,
  type Listing,
  type SearchResult,
  type WorkspaceTools,
} from "../core/tools";
import type { UnsavedTexts } from "../core/session";
import type { CommandApprovals } from "./commandApproval";
import type { Log } from "./log";
import type { CommandTerminal } from "./terminal";
import { openDocument, requireRootPath } from "./workspacePaths";

export const DECLINED_MESSAGE = "The person declined to run it";

/** Told after each write_file: the text before (undefined: the file was created) and after. */
export type WriteListener = (relPath: string, before: string | undefined, after: string) => void;

export interface VsCodeToolsDeps {
  log: Log;
  terminal: CommandTerminal;
  approvals: CommandApprovals;
  commandTimeoutSeconds: () => number;
  onWritten?: WriteListener;
}

export class VsCodeWorkspaceTools implements WorkspaceTools, UnsavedTexts {
  private fsTools: FsWorkspaceTools | undefined;
  private fsRoot: string | undefined;

  constructor(private readonly deps: VsCodeToolsDeps) {}

  private disk(): FsWorkspaceTools {
    const root = requireRootPath();
    if (!this.fsTools || this.fsRoot !== root) {
      this.fsTools = new FsWorkspaceTools(root);
      this.fsRoot = root;
    }
    return this.fsTools;
  }

  /** The absolute path of a workspace-relative one, or ToolError path_outside_workspace etc.
   * Confinement is checked on the real path; the editor's URIs use the path under the root as
   * the workspace names it (the root itself may be reached through a symlink). */
  async resolve(relPath: string): Promise<string> {
    const root = requireRootPath();
    await resolveInWorkspace(root, relPath);
    return path.resolve(root, relPath);
  }

  async readFile(relPath: string): Promise<string> {
    const abs = await this.resolve(relPath);
    const doc = openDocument(abs);
    if (doc) return doc.getText();
    return this.disk().readFile(relPath);
  }

  /** The open document's text when it has unsaved changes (else undefined). */
  async unsavedText(relPath: string): Promise<string | undefined> {
    const doc = openDocument(await this.resolve(relPath));
    return doc?.isDirty ? doc.getText() : undefined;
  }

  listDir(relPath: string, depth: number, limit: number | null): Promise<Listing> {
    return this.disk().listDir(relPath, depth, limit);
  }

  search(pattern: string, relPath: string, regex: boolean, maxResults: number | null): Promise<SearchResult> {
    return this.disk().search(pattern, relPath, regex, maxResults);
  }

  async writeFile(relPath: string, text: string): Promise<boolean> {
    const abs = await this.resolve(relPath);
    const uri = vscode.Uri.file(abs);
    let doc = openDocument(abs);
    const created = !doc && !(await exists(uri));
    const edit = new vscode.WorkspaceEdit();
    let before: string | undefined;
    if (created) {
      await vscode.workspace.fs.createDirectory(vscode.Uri.file(path.dirname(abs)));
      edit.createFile(uri, { ignoreIfExists: true });
      edit.insert(uri, new vscode.Position(0, 0), text);
    } else {
      doc ??= await vscode.workspace.openTextDocument(uri);
      before = doc.getText();
      edit.replace(uri, new vscode.Range(doc.positionAt(0), doc.positionAt(before.length)), text);
    }
    if (!(await vscode.workspace.applyEdit(edit))) {
      throw new ToolError("workspace_error", `The editor could not change ${relPath} (is it read-only?).`);
    }
    doc = openDocument(abs) ?? (await vscode.workspace.openTextDocument(uri));
    if (!(await doc.save())) {
      throw new ToolError("workspace_error", `The editor changed ${relPath} but could not save it.`);
    }
    this.deps.log.info(`${created ? "Created" : "Wrote"} ${relPath} (${text.length} characters).`);
    try {
      this.deps.onWritten?.(relPath, before, text);
    } catch (error) {
      this.deps.log.error(`After writing ${relPath}`, error);
    }
    return created;
  }

  async runCommand(command: string, timeoutS: number, outputCapBytes: number): Promise<CommandResult> {
    const root = requireRootPath();
    if (!(await this.deps.approvals.permit(command))) {
      throw new ToolError("command_error", DECLINED_MESSAGE);
    }
    const limit = this.deps.commandTimeoutSeconds();
    const timeout = timeoutS > 0 ? Math.min(timeoutS, limit) : limit;
    const terminal = this.deps.terminal;
    await terminal.reveal();
    terminal.header(command, root);
    this.deps.log.info(`Running (timeout ${timeout} s): ${command}`);
    const result = await runCommand({
      command,
      cwd: root,
      timeoutS: timeout,
      outputCapBytes,
      onOutput: (chunk: string) => terminal.write(chunk),
    });
    terminal.footer(result.exit_code, result.timed_out, result.truncated);
    this.deps.log.info(`Command finished (${result.timed_out ? "timed out" : `exit code ${result.exit_code}`}): ${command}`);
    return result;
  }
}

async function exists(uri: vscode.Uri): Promise<boolean> {
  try {
    await vscode.workspace.fs.stat(uri);
    return true;
  } catch {
    return false;
  }
}
