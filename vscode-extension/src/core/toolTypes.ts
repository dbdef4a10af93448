// The values and errors of the workspace tools (the wire results of
// agent_server/agent/client_workspace.py): kept apart from tools.ts so fsTools.ts and
// confine.ts can import them without an import cycle. Import them from "./tools".

export type EntryKind = "file" | "dir" | "symlink" | "other";

export interface DirEntry {
  path: string; // workspace-relative, '/'-separated
  kind: EntryKind;
  size: number | null; // bytes, for files
}

export interface Listing {
  entries: DirEntry[];
  truncated: boolean; // the limit was reached
}

export interface SearchMatch {
  path: string;
  line: number; // 1-based
  text: string; // the line, shortened when very long
}

export interface SearchResult {
  matches: SearchMatch[];
  truncated: boolean; // max_results (or the file cap) was reached
}

export interface CommandResult {
  exit_code: number | null; // null when killed for the timeout; negative = signal
  output: string; // stdout and stderr interleaved
  timed_out: boolean;
  truncated: boolean; // over the cap; head and tail kept
}

/** Error codes of the server's WorkspaceError classes (agent_server/agent/workspace_types.py). */
export type ToolErrorCode =
  | "invalid_path"
  | "path_outside_workspace"
  | "file_not_found"
  | "not_a_file"
  | "not_a_directory"
  | "file_too_large"
  | "binary_file"
  | "permission_denied"
  | "invalid_pattern"
  | "command_error"
  | "workspace_error"
  | "file_changed" // the editor's own: a write_file that would undo the person's changes (writeGuard.ts)
  | "unknown_method"
  | "invalid_request";

/** A tool call failed in a way the model can usually fix; `message` says how. */
export class ToolError extends Error {
  constructor(
    readonly code: ToolErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "ToolError";
  }
}

/** What the agent may do in the editor's workspace. Paths are workspace-relative. */
export interface WorkspaceTools {
  readFile(path: string): Promise<string>;
  /** `depth` >= 1; `limit` null = the implementation's default. */
  listDir(path: string, depth: number, limit: number | null): Promise<Listing>;
  search(pattern: string, path: string, regex: boolean, maxResults: number | null): Promise<SearchResult>;
  /** Replace or create the file (parents too); resolves true when it was created. */
  writeFile(path: string, text: string): Promise<boolean>;
  /** Run through /bin/sh -c in the workspace root (after the person approved it). */
  runCommand(command: string, timeoutS: number, outputCapBytes: number): Promise<CommandResult>;
}

