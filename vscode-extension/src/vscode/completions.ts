// Inline completions (ghost text) from the agent server: debounced (the previous request's
// cancellation token fires on each keystroke), prefix = the last ~4000 characters and
// suffix = the next ~1000, skipped while offline. An empty suggestion shows nothing. What the
// person does with the ghost text is decided by core CompletionFeedback from the document
// changes, and sent as edit.outcome: shown, accepted, partially_accepted, rejected
// "dismissed", and -- outcomeSettleSeconds after one was not taken -- written, with what the
// person wrote at its place instead.
import * as path from "node:path";
import * as vscode from "vscode";
import { CompletionFeedback, type FeedbackExtra } from "../core/completionFeedback";
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
  private readonly feedback: CompletionFeedback;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly manager: ConnectionManager,
    private readonly log: Log,
    private readonly sessionId: () => string | undefined,
  ) {
    this.feedback = new CompletionFeedback((id, outcome, extra) => this.report(id, outcome, extra), {
      settleMs: () => readSettings().outcomeSettleSeconds * 1000,
    });
    this.disposables.push(
      vscode.languages.registerInlineCompletionItemProvider([{ scheme: "file" }, { scheme: "untitled" }], this),
      vscode.commands.registerCommand(ACCEPTED_COMMAND, (id: unknown, length: unknown) => this.acceptedByCommand(id, length)),
      vscode.workspace.onDidChangeTextDocument((e) => this.documentChanged(e)),
      vscode.workspace.onDidCloseTextDocument((d) => this.feedback.documentClosed(d.uri.toString())),
      vscode.window.onDidChangeTextEditorSelection((e) => this.selectionChanged(e)),
      vscode.window.onDidChangeActiveTextEditor(() => this.feedback.dismiss()),
    );
  }

  async provideInlineCompletionItems(
    document: vscode.TextDocument,
    position: vscode.Position,
    context: vscode.InlineCompletionContext,
    token: vscode.CancellationToken,
  ): Promise<vscode.InlineCompletionItem[] | undefined> {
    const version = document.version; // `position` is in this version of the text
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
    // A document changed while waiting: the offset is stale, and its place could not be followed.
    if (token.isCancellationRequested || document.version !== version) return undefined;
    const text = this.feedback.offer(reply, document.uri.toString(), offset);
    if (text === undefined) return undefined; // an empty suggestion: nothing shown, nothing reported
    const item = new vscode.InlineCompletionItem(text, new vscode.Range(position, position), {
      title: "Apprentice completion accepted",
      command: ACCEPTED_COMMAND,
      arguments: [reply.suggestion_id, text.length],
    });
    return [item];
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
    // A completion still on screen, or a place still followed for `written`, is not
    // reported: we cannot know what became of it.
    this.feedback.dispose();
  }

  private documentChanged(e: vscode.TextDocumentChangeEvent): void {
    if (e.contentChanges.length === 0) return;
    this.feedback.onDocumentChange(
      e.document.uri.toString(),
      e.contentChanges.map((c) => ({ offset: c.rangeOffset, removedLength: c.rangeLength, insertedText: c.text })),
    );
  }

  /** The cursor left the ghost text (click, arrow keys): it was dismissed. */
  private selectionChanged(e: vscode.TextEditorSelectionChangeEvent): void {
    const active = this.feedback.tracker.active;
    if (!active) return;
    const doc = e.textEditor.document;
    if (doc.uri.toString() !== active.documentUri) return;
    const cursor = doc.offsetAt(e.selections[0].active);
    if (cursor !== active.offset + active.taken) this.feedback.dismiss();
  }

  /** The item's command: VS Code inserted the whole completion (Tab). */
  private acceptedByCommand(id: unknown, length: unknown): void {
    if (typeof id !== "string") return;
    this.feedback.acceptedByCommand(id, typeof length === "number" ? length : undefined);
  }

  private report(id: string, outcome: CompletionOutcome, extra: FeedbackExtra): void {
    const conn = this.manager.connection;
    if (!conn) {
      this.log.warn(`Completion ${outcome} not reported (offline).`);
      return;
    }
    const detail =
      extra.acceptedLength !== undefined ? ` (${extra.acceptedLength} characters)`
      : extra.finalText !== undefined ? ` (${extra.finalText.length} characters written)`
      : "";
    this.log.info(`Completion ${id}: ${outcome}${detail}.`);
    sendOutcome(conn, id, outcome, { acceptedLength: extra.acceptedLength, reason: extra.reason, finalText: extra.finalText }).catch((error) =>
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
