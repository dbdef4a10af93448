// The Apprentice VS Code extension's entry point: `activate` wires the log, the status bar,
// the connection (with token lookup, reconnects and an optional local server), the chat view
// (its session id kept in the workspace state, so a restarted editor resumes it),
// proposed-edit review, the workspace tools the agent calls, outcome follow-ups and inline
// completions, and registers the commands; `deactivate` closes the connection, stops a server
// it started and drops pending follow-up timers (nothing half-known is sent).
import * as vscode from "vscode";
import { ToolError } from "./core/tools";
import { OutcomeTracker } from "./core/outcomes";
import { sendOutcome, type EditorHost } from "./core/session";
import { SessionMemory } from "./core/sessionMemory";
import { ChatController } from "./vscode/chatController";
import { CHAT_VIEW_ID, ChatViewProvider } from "./vscode/chatView";
import { CommandApprovals } from "./vscode/commandApproval";
import { InlineCompletions } from "./vscode/completions";
import { ConnectionManager } from "./vscode/connectionManager";
import { EditReviewer } from "./vscode/editReview";
import { Log, describeError } from "./vscode/log";
import { LocalServer } from "./vscode/serverProcess";
import { readSettings } from "./vscode/settings";
import { StatusBar } from "./vscode/statusBar";
import { CommandTerminal } from "./vscode/terminal";
import { promptForToken } from "./vscode/token";
import { VsCodeWorkspaceTools } from "./vscode/workspaceTools";
import { workspaceRoot } from "./vscode/workspacePaths";

let shutdown: (() => Promise<void>) | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const version = String((context.extension.packageJSON as { version?: unknown }).version ?? "0");
  const log = new Log();
  const status = new StatusBar();
  const server = new LocalServer(log);
  const manager = new ConnectionManager(context.secrets, log, status, server, `apprentice-vscode/${version} (VS Code ${vscode.version})`);
  const terminal = new CommandTerminal();
  const approvals = new CommandApprovals(log, () => workspaceRoot()?.fsPath);
  const tools = new VsCodeWorkspaceTools({
    log,
    terminal,
    approvals,
    commandTimeoutSeconds: () => readSettings().commandTimeoutSeconds,
  });

  // Follow-ups of decided edits (accepted, and rejected ones the person then wrote). The settle time is fixed per tracker, so a changed setting
  // makes a new tracker for the next accepts; the old ones finish what they track.
  const trackers: OutcomeTracker[] = [];
  const makeTracker = (): OutcomeTracker => {
    const tracker = new OutcomeTracker({
      settleMs: readSettings().outcomeSettleSeconds * 1000,
      readText: async (relPath) => {
        try {
          return await tools.readFile(relPath);
        } catch (error) {
          if (error instanceof ToolError && error.code === "file_not_found") return undefined;
          throw error;
        }
      },
      report: async (suggestionId, kind, extra) => {
        const session = chat.currentSession;
        const ack =
          session && !session.conn.closed
            ? await session.reportOutcome(suggestionId, kind, extra)
            : await sendOutcome(await manager.ensure(), suggestionId, kind, extra);
        log.info(`Follow-up of suggestion ${suggestionId}: ${kind}${ack.duplicate ? " (already stored)" : ""}.`);
        return ack;
      },
    });
    trackers.push(tracker);
    return tracker;
  };
  let tracker = makeTracker();

  const host: EditorHost = {
    tools,
    reviewEdit: (p) => reviewer.review(p),
    approveCommand: (r) => approvals.approve(r.command),
    get outcomes() {
      return tracker;
    },
  };

  // The chat and the reviewer know each other: decisions show on the card, card buttons decide.
  // The chat's session id is kept per workspace, so a restarted editor resumes that session.
  const memory = new SessionMemory(context.workspaceState);
  const chat: ChatController = new ChatController(manager, host, () => reviewer, log, () => approvals.clear(), memory);
  const reviewer: EditReviewer = new EditReviewer(
    log,
    (relPath) => tools.readFile(relPath),
    async (relPath) => vscode.Uri.file(await tools.resolve(relPath)),
    chat,
  );
  const view = new ChatViewProvider(
    context.extensionUri,
    (m) => chat.handle(m),
    () => chat.replay(),
  );
  chat.attach(view);
  const completions = new InlineCompletions(manager, log, () => chat.currentSession?.id);

  const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
  const int = (v: unknown): number | undefined => (typeof v === "number" && Number.isInteger(v) ? v : undefined);
  const command = (id: string, fn: (...args: unknown[]) => unknown) =>
    vscode.commands.registerCommand(id, async (...args: unknown[]) => {
      try {
        await fn(...args);
      } catch (error) {
        log.error(`${id} failed`, error);
        void vscode.window.showErrorMessage(`Apprentice: ${describeError(error)}`);
      }
    });

  context.subscriptions.push(
    log,
    status,
    terminal,
    reviewer,
    completions,
    vscode.window.registerWebviewViewProvider(CHAT_VIEW_ID, view, { webviewOptions: { retainContextWhenHidden: true } }),
    command("apprentice.openChat", () => view.reveal()),
    command("apprentice.newSession", async () => {
      await chat.newSession();
      await view.reveal();
    }),
    command("apprentice.connect", () => manager.connectNow()),
    command("apprentice.setToken", async () => {
      const result = await promptForToken(context.secrets);
      if (result === "cancelled") return;
      log.info(result === "set" ? "A token was stored in the secret storage." : "The stored token was removed.");
      await manager.reconnect();
    }),
    command("apprentice.acceptEdit", (id) => reviewer.acceptEdit(str(id))),
    command("apprentice.rejectEdit", (id, reason) => reviewer.rejectEdit(str(id), str(reason))),
    command("apprentice.acceptHunk", (id, index) => reviewer.decideHunk(true, str(id), int(index))),
    command("apprentice.rejectHunk", (id, index) => reviewer.decideHunk(false, str(id), int(index))),
    command("apprentice.showDiff", (id) => reviewer.showDiff(str(id))),
    command("apprentice.showLog", () => log.show()),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("apprentice.serverUrl")) {
        log.info(`apprentice.serverUrl is now ${readSettings().serverUrl}; reconnecting.`);
        void manager.reconnect();
      }
      if (e.affectsConfiguration("apprentice.outcomeSettleSeconds")) tracker = makeTracker();
    }),
  );

  log.info(`Apprentice ${version} activated (VS Code ${vscode.version}); server ${readSettings().serverUrl}.`);
  // Connect at startup; a refused token is worth telling, a missing server only the status bar.
  manager.ensure(false).catch((error) => {
    if ((error as { kind?: string }).kind === "unauthorized") manager.tellPerson(error);
  });

  shutdown = async () => {
    for (const t of trackers) t.dispose(); // pending follow-ups are dropped, not guessed
    chat.dispose();
    manager.dispose();
    await server.stop();
  };
}

export async function deactivate(): Promise<void> {
  const stop = shutdown;
  shutdown = undefined;
  await stop?.();
}
