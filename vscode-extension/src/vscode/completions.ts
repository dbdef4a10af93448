// Inline completions (ghost text) from the agent server: debounced (the previous request's
// cancellation token fires on each keystroke), prefix = the last ~4000 characters and
// suffix = the next ~1000, skipped while offline. What the person does with the ghost text
// is classified by core CompletionTracker from the document changes, and sent as edit.outcome
// (shown, accepted, partially_accepted, rejected "dismissed").
import * as path from "node:path";
import * as vscode from "vscode";
import { CompletionTracker, type CompletionReport } from "../core/completions";
import { sendOutcome } from "../core/sendOutcome";
import type { CompletionOutcome } from "../protocol/vocab";
import { isMessage } from "../protocol/messages";
import type { ConnectionManager } from "./connectionManager";
import { Log, describeError } from "./log";
import { readSettings } from "./settings";
import { relativePath } from "./workspacePaths";

export const PREFIX_CHARS = 4000;
export const SUFFIX_CHARS = 1000;
const REQUEST_TIMEOUT_MS = 15_000;
export const ACCEPTED_COMMAND = "apprentice.completionAccepted";

export class InlineCompletions implements vscode.InlineCompletionItemProvider, vscode.Disposable {
  private readonly tracker: CompletionTracker;
  private readonly accepted = new Set<string>(); // ids already reported accepted: nothing after
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly manager: ConnectionManager,
    private readonly log: Log,
    private readonly sessionId: () => string | undefined,
  ) {
    this.tracker = new CompletionTracker((id, outcome, extra) => this.report(id, outcome, extra));
    this.disposables.push(
      vscode.languages.registerInlineCompletionItemProvider([{ scheme: "file" }, { scheme: "untitled" }], this),
      vscode.commands.registerCommand(ACCEPTED_COMMAND, (id: unknown, length: unknown) => this.acceptedByCommand(id, length)),
      vscode.workspace.onDidChangeTextDocument((e) => this.documentChanged(e)),
      vscode.window.onDidChangeTextEditorSelection((e) => this.selectionChanged(e)),
      vscode.window.onDidChangeActiveTextEditor(() => this.tracker.dismiss()),
    );
  }

  async provideInlineCompletionItems(
    document: vscode.TextDocument,
    position: vscode.Position,
    context: vscode.InlineCompletionContext,
    token: vscode.CancellationToken,
  ): Promise<vscode.InlineCompletionItem[] | undefined> {
    const settings = readSettings();
    if (!settings.inlineCompletionsEnabled) return undefined;
    if (!this.manager.connection) return undefined; // offline: no waiting on a reconnect here
    if (context.triggerKind === vscode.InlineCompletionTriggerKind.Automatic) {
      if (!(await sleep(settings.inlineCompletionsDebounceMs, token))) return undefined;
    }
    const conn = this.manager.connection;
    if (!conn || token.isCancellationRequested) return undefined;
    // Only the window around the cursor is read: no copy of a large file per keystroke pause.
    const offset = document.offsetAt(position);
    const windowStart = document.positionAt(Math.max(0, offset - PREFIX_CHARS));
    const windowEnd = document.positionAt(offset + SUFFIX_CHARS); // clamped to the end
    const sessionId = this.sessionId();
    let reply;
    try {
      reply = await conn.request(
        {
          type: "completion.request",
          path: relativePath(document.uri) ?? path.basename(document.uri.path),
          language: document.languageId,
          prefix: document.getText(new vscode.Range(windowStart, position)),
          suffix: document.getText(new vscode.Range(position, windowEnd)),
          ...(sessionId ? { session_id: sessionId } : {}),
        },
        isMessage("completion.suggestion"),
        REQUEST_TIMEOUT_MS,
      );
    } catch (error) {
      this.log.warn(`Inline completion failed: ${describeError(error)}`);
      return undefined;
    }
    if (token.isCancellationRequested || !reply.text) return undefined;
    this.tracker.shown({ suggestionId: reply.suggestion_id, documentUri: document.uri.toString(), offset, text: reply.text });
    const item = new vscode.InlineCompletionItem(reply.text, new vscode.Range(position, position), {
      title: "Apprentice completion accepted",
      command: ACCEPTED_COMMAND,
      arguments: [reply.suggestion_id, reply.text.length],
    });
    return [item];
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
    // A completion still on screen is not reported: we cannot know what became of it.
  }

  private documentChanged(e: vscode.TextDocumentChangeEvent): void {
    if (e.contentChanges.length === 0) return;
    this.tracker.onDocumentChange(
      e.document.uri.toString(),
      e.contentChanges.map((c) => ({ offset: c.rangeOffset, removedLength: c.rangeLength, insertedText: c.text })),
    );
  }

  /** The cursor left the ghost text (click, arrow keys): it was dismissed. */
  private selectionChanged(e: vscode.TextEditorSelectionChangeEvent): void {
    const active = this.tracker.active;
    if (!active) return;
    const doc = e.textEditor.document;
    if (doc.uri.toString() !== active.documentUri) return;
    const cursor = doc.offsetAt(e.selections[0].active);
    if (cursor !== active.offset + active.taken) this.tracker.dismiss();
  }

  /** The item's command: VS Code inserted the whole completion (Tab). */
  private acceptedByCommand(id: unknown, length: unknown): void {
    if (typeof id !== "string" || this.accepted.has(id)) return;
    this.report(id, "accepted", { acceptedLength: typeof length === "number" ? length : undefined });
  }

  private report(id: string, outcome: CompletionOutcome, extra: CompletionReport): void {
    if (this.accepted.has(id)) return; // accepted already; a later settle is not news
    if (outcome === "accepted") {
      this.accepted.add(id);
      if (this.accepted.size > 500) this.accepted.delete(this.accepted.values().next().value as string);
    }
    const conn = this.manager.connection;
    if (!conn) {
      this.log.warn(`Completion ${outcome} not reported (offline).`);
      return;
    }
    this.log.info(`Completion ${id}: ${outcome}${extra.acceptedLength !== undefined ? ` (${extra.acceptedLength} characters)` : ""}.`);
    sendOutcome(conn, id, outcome, { acceptedLength: extra.acceptedLength, reason: extra.reason }).catch((error) =>
      this.log.error(`Reporting completion ${outcome} failed`, error),
    );
  }
}

/** Wait `ms`; false when the token was cancelled first. */
function sleep(ms: number, token: vscode.CancellationToken): Promise<boolean> {
  if (token.isCancellationRequested) return Promise.resolve(false);
  if (ms <= 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      sub.dispose();
      resolve(!token.isCancellationRequested);
    }, ms);
    const sub = token.onCancellationRequested(() => {
      clearTimeout(timer);
      sub.dispose();
      resolve(false);
    });
  });
}
