// The editor side of the agent's workspace tools: the `WorkspaceTools` interface (the five
// tool.request methods with the wire results of agent_server/agent/client_workspace.py),
// `answerToolRequest` (one tool.request -> {result} | {error}), and `ToolError`.
// `FsWorkspaceTools` (fsTools.ts) implements it on node:fs, confined to one root
// (confine.ts); the VS Code layer reuses it and overrides read/write/run.

import { shellQuote } from "./commandRunner";

export {
  ToolError,
  type CommandResult,
  type DirEntry,
  type EntryKind,
  type Listing,
  type SearchMatch,
  type SearchResult,
  type ToolErrorCode,
  type WorkspaceTools,
} from "./toolTypes";
import { ToolError, type WorkspaceTools } from "./toolTypes";

export const TOOL_METHODS = ["read_file", "list_dir", "search", "write_file", "run_command"] as const;

export const DEFAULT_COMMAND_TIMEOUT_S = 120;
export const DEFAULT_COMMAND_OUTPUT_CAP = 64_000;

export type ToolReply = { result: Record<string, unknown> } | { error: { code: string; message: string } };

function param<T>(params: Record<string, unknown>, name: string, kind: string, fallback?: T): T {
  const value = params[name];
  if (value === undefined || value === null) {
    if (fallback !== undefined) return fallback;
    throw new ToolError("invalid_request", `The parameter '${name}' is missing.`);
  }
  const actual = Array.isArray(value) ? "array" : typeof value;
  if (actual !== kind) {
    throw new ToolError("invalid_request", `The parameter '${name}' must be a ${kind}, got ${actual}.`);
  }
  return value as T;
}

function commandText(value: unknown): string {
  if (typeof value === "string") return value;
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) return shellQuote(value as string[]);
  throw new ToolError("invalid_request", "The parameter 'command' must be a string or a list of strings.");
}

/** Run one tool.request on `tools`: `{result}` on success, `{error: {code, message}}` otherwise. */
export async function answerToolRequest(
  tools: WorkspaceTools,
  method: string,
  params: Record<string, unknown> | undefined,
): Promise<ToolReply> {
  const p = params ?? {};
  try {
    switch (method) {
      case "read_file":
        return { result: { text: await tools.readFile(param<string>(p, "path", "string")) } };
      case "list_dir": {
        const listing = await tools.listDir(
          param<string>(p, "path", "string", "."),
          param<number>(p, "depth", "number", 1),
          p.limit === undefined || p.limit === null ? null : param<number>(p, "limit", "number"),
        );
        return { result: { ...listing } };
      }
      case "search": {
        const found = await tools.search(
          param<string>(p, "pattern", "string"),
          param<string>(p, "path", "string", "."),
          param<boolean>(p, "regex", "boolean", false),
          p.max_results === undefined || p.max_results === null ? null : param<number>(p, "max_results", "number"),
        );
        return { result: { ...found } };
      }
      case "write_file": {
        const created = await tools.writeFile(param<string>(p, "path", "string"), param<string>(p, "text", "string"));
        return { result: { created } };
      }
      case "run_command": {
        const ran = await tools.runCommand(
          commandText(p.command),
          param<number>(p, "timeout_s", "number", DEFAULT_COMMAND_TIMEOUT_S),
          param<number>(p, "output_cap_bytes", "number", DEFAULT_COMMAND_OUTPUT_CAP),
        );
        return { result: { ...ran } };
      }
      default:
        return {
          error: { code: "unknown_method", message: `Unknown method '${method}'; known: ${TOOL_METHODS.join(", ")}.` },
        };
    }
  } catch (err) {
    if (err instanceof ToolError) return { error: { code: err.code, message: err.message } };
    const message = err instanceof Error ? err.message : String(err);
    return { error: { code: "workspace_error", message: `${method} failed in the editor: ${message}` } };
  }
}

export { FsWorkspaceTools, type FsWorkspaceOptions } from "./fsTools";
export { resolveInWorkspace } from "./confine";
