// The extension's settings (package.json "contributes.configuration"), read fresh each time so
// a change in the Settings UI applies to the next connection, completion or command.
import * as vscode from "vscode";

export { healthUrl, isLoopbackUrl } from "../core/serverUrl";

export interface ApprenticeSettings {
  serverUrl: string;
  autoStartServer: boolean;
  serverCommand: string;
  outcomeSettleSeconds: number;
  inlineCompletionsEnabled: boolean;
  inlineCompletionsDebounceMs: number;
  commandTimeoutSeconds: number;
}

export function readSettings(): ApprenticeSettings {
  const c = vscode.workspace.getConfiguration("apprentice");
  return {
    serverUrl: c.get<string>("serverUrl", "ws://127.0.0.1:8765/v1/ws").trim(),
    autoStartServer: c.get<boolean>("autoStartServer", false),
    serverCommand: c.get<string>("serverCommand", "apprentice").trim() || "apprentice",
    outcomeSettleSeconds: positive(c.get<number>("outcomeSettleSeconds", 30), 30),
    inlineCompletionsEnabled: c.get<boolean>("inlineCompletions.enabled", true),
    inlineCompletionsDebounceMs: Math.max(0, finite(c.get<number>("inlineCompletions.debounceMs", 150), 150)),
    commandTimeoutSeconds: positive(c.get<number>("commandTimeoutSeconds", 120), 120),
  };
}

function finite(value: number | undefined, fallback: number): number {
  return typeof value === "number" && Number.isFinite(value) ? value : fallback;
}

function positive(value: number | undefined, fallback: number): number {
  const v = finite(value, fallback);
  return v > 0 ? v : fallback;
}
