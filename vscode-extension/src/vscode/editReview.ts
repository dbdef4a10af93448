// Proposed edits waiting for the person (host.reviewEdit): each opens a diff editor between
// the real file and a read-only "apprentice-proposal" document holding the proposed text,
// with CodeLens (accept / reject the edit or one hunk) and line decorations on both sides.
// The chat card buttons and the commands apprentice.acceptEdit / rejectEdit / acceptHunk /
// rejectHunk / showDiff all end in the same ProposalReview, whose decision resolves the
// pending reviewEdit promise. The hunks are placed where their lines are now (the person may
// have added or removed lines since the server read the file); when a hunk's own lines
// changed, the proposal is shown on the chat card only, with a notice, and the person's
// decision is still theirs to make (an accept makes the agent redo the edit: writeGuard.ts).
// A proposal that creates a file is diffed against an empty document. What the proposals
// look like (CodeLens, decorations, the diff tab) is in proposalView.ts.
import * as vscode from "vscode";
import { ProposalReview } from "../core/hunks";
import { describeConflicts, hunkAtLine, hunkPlaces, locateHunks, rebaseHunks } from "../core/hunkPlacement";
import type { EditDecision } from "../core/session";
import { ToolError } from "../core/tools";
import type { EditProposed } from "../protocol/messages";
import type { Log } from "./log";
import { closeDiffTab, PROPOSAL_SCHEME, ProposalDecorations, proposalLenses, type PendingEdit } from "./proposalView";

export type { HunkPlace } from "../core/hunkPlacement";
export { PROPOSAL_SCHEME, type PendingEdit } from "./proposalView";

const CONTEXT_KEY = "apprentice.hasPendingEdit";
const EMPTY_BASE = "empty-base"; // URI fragment of the empty left side for a new file

/** What the chat shows about decisions (posted by the reviewer as they happen). */
export interface ReviewListener {
  hunkDecided(suggestionId: string, index: number, accepted: boolean): void;
  editDecided(suggestionId: string, decision: EditDecision): void;
  editExpired(suggestionId: string): void;
  /** Something the person should know about a proposal (the file changed under it). */
  editNotice(suggestionId: string, text: string): void;
}

/** The notice on a proposal whose hunks no longer fit the file. */
export function staleNotice(path: string, why: string): string {
  return `${path} changed since the agent read it (${why}); accepting asks the agent to apply it again.`;
}

export class EditReviewer implements vscode.TextDocumentContentProvider, vscode.CodeLensProvider, vscode.Disposable {
  private readonly pending = new Map<string, PendingEdit>();
  private readonly lensChanged = new vscode.EventEmitter<void>();
  private readonly contentChanged = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChangeCodeLenses = this.lensChanged.event;
  readonly onDidChange = this.contentChanged.event;
  private readonly decorations = new ProposalDecorations();
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly log: Log,
    private readonly readText: (relPath: string) => Promise<string>,
    private readonly fileUriOf: (relPath: string) => Promise<vscode.Uri>,
    private readonly listener: ReviewListener,
  ) {
    this.disposables.push(
      vscode.workspace.registerTextDocumentContentProvider(PROPOSAL_SCHEME, this),
      vscode.languages.registerCodeLensProvider([{ scheme: "file" }, { scheme: PROPOSAL_SCHEME }], this),
      vscode.window.onDidChangeVisibleTextEditors(() => this.decorate()),
    );
    void vscode.commands.executeCommand("setContext", CONTEXT_KEY, false);
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  get(suggestionId: string): PendingEdit | undefined {
    return this.pending.get(suggestionId);
  }

  /** host.reviewEdit: show the proposal and resolve once every hunk is decided. */
  async review(proposal: EditProposed): Promise<EditDecision> {
    let current = "";
    let exists = true;
    try {
      current = await this.readText(proposal.path);
    } catch (error) {
      if (!(error instanceof ToolError && error.code === "file_not_found")) throw error; // the session reports it
      exists = false; // the agent creates the file
    }
    const { located, conflicts } = locateHunks(current, proposal.hunks);
    const stale = conflicts.length ? staleNotice(proposal.path, describeConflicts(conflicts)) : undefined;
    const proposedText = stale ? "" : rebaseHunks(current, proposal.hunks, proposal.hunks.map((h) => h.index));
    const docPath = "/" + proposal.path.replace(/^\/+/, "");
    const proposalUri = vscode.Uri.from({ scheme: PROPOSAL_SCHEME, path: docPath, query: proposal.suggestion_id });
    const fileUri = exists
      ? await this.fileUriOf(proposal.path)
      : vscode.Uri.from({ scheme: PROPOSAL_SCHEME, path: docPath, query: proposal.suggestion_id, fragment: EMPTY_BASE });
    const review = new ProposalReview(proposal.hunks);
    const decided = new Promise<EditDecision>((resolve) => {
      const edit: PendingEdit = {
        proposal,
        fileUri,
        proposalUri,
        proposedText,
        review,
        places: stale ? [] : hunkPlaces(located),
        stale,
        resolve,
        createdAt: Date.now(),
      };
      this.pending.set(proposal.suggestion_id, edit);
      review.onDecided((d) => this.finish(edit, d));
    });
    this.changed();
    this.log.info(`Edit proposed for ${proposal.path} (${proposal.hunks.length} hunk(s), suggestion ${proposal.suggestion_id}).`);
    const moved = located.filter((l) => l.offset !== 0).map((l) => `hunk ${l.hunk.index + 1} by ${l.offset}`);
    if (moved.length && !stale) this.log.info(`The file changed since the agent read it; placed ${moved.join(", ")} line(s).`);
    if (stale) {
      this.log.warn(stale);
      this.listener.editNotice(proposal.suggestion_id, stale);
    } else {
      await this.showDiff(proposal.suggestion_id).catch((error) => this.log.error("Could not open the proposed diff", error));
    }
    return decided;
  }

  // ---- the person's decisions (commands, CodeLens, chat buttons) -----------------------

  async acceptEdit(suggestionId?: string): Promise<void> {
    const edit = this.target(suggestionId);
    if (!edit) return;
    const undecided = edit.review.hunkIndices.filter((i) => edit.review.decided(i) === undefined);
    if (undecided.length === edit.review.hunks.length) edit.review.acceptAll();
    else for (const index of undecided) this.decide(edit, index, true);
  }

  /** `reason` given (even "") = no question; otherwise ask (Escape = no reason, still rejects). */
  async rejectEdit(suggestionId?: string, reason?: string): Promise<void> {
    const edit = this.target(suggestionId);
    if (!edit) return;
    const undecided = edit.review.hunkIndices.filter((i) => edit.review.decided(i) === undefined);
    const anyAccepted = edit.review.hunkIndices.some((i) => edit.review.decided(i) === true);
    let why = reason;
    if (why === undefined) {
      why = await vscode.window.showInputBox({
        title: `Reject the edit of ${edit.proposal.path}`,
        prompt: "Why? (optional; the agent reads it. Escape rejects without a reason.)",
        placeHolder: "e.g. keep the old name; the tests rely on it",
        ignoreFocusOut: false,
      });
      if (!this.pending.has(edit.proposal.suggestion_id)) return; // decided meanwhile
    }
    const text = why?.trim() ? why.trim() : undefined;
    if (text !== undefined) edit.review.setReason(text);
    if (!anyAccepted && undecided.length === edit.review.hunks.length) edit.review.rejectAll(text);
    else for (const index of undecided) this.decide(edit, index, false);
  }

  async decideHunk(accept: boolean, suggestionId?: string, index?: number): Promise<void> {
    let edit: PendingEdit | undefined;
    let hunk = index;
    if (suggestionId !== undefined && index !== undefined) {
      edit = this.pending.get(suggestionId);
      if (!edit) return void vscode.window.showInformationMessage("That edit is no longer waiting for a decision.");
    } else {
      const found = this.hunkAtCursor();
      if (!found) {
        return void vscode.window.showInformationMessage(
          "Put the cursor in a hunk of a proposed edit (or use the CodeLens above the hunk).",
        );
      }
      [edit, hunk] = found;
    }
    if (hunk === undefined || !edit.review.hunkIndices.includes(hunk)) {
      return void vscode.window.showErrorMessage(`The edit of ${edit.proposal.path} has no hunk ${hunk}.`);
    }
    this.decide(edit, hunk, accept);
  }

  async showDiff(suggestionId?: string): Promise<void> {
    const edit = this.target(suggestionId);
    if (!edit) return;
    if (edit.stale) return void vscode.window.showInformationMessage(`${edit.stale} The proposal is on its chat card.`);
    await vscode.commands.executeCommand(
      "vscode.diff",
      edit.fileUri,
      edit.proposalUri,
      `${edit.proposal.path} ↔ Apprentice proposal`,
      { preview: false, preserveFocus: false },
    );
    this.decorate();
  }

  /** The turn ended or the connection closed: these edits can no longer be applied. */
  expire(sessionId?: string): void {
    for (const edit of [...this.pending.values()]) {
      if (sessionId !== undefined && edit.proposal.session_id !== sessionId) continue;
      this.pending.delete(edit.proposal.suggestion_id);
      this.log.info(`The proposed edit of ${edit.proposal.path} expired undecided (the turn ended).`);
      this.listener.editExpired(edit.proposal.suggestion_id);
      void this.closeDiff(edit);
    }
    this.changed();
  }

  // ---- providers ---------------------------------------------------------------------------

  provideTextDocumentContent(uri: vscode.Uri): string {
    if (uri.fragment === EMPTY_BASE) return ""; // the left side of a proposal that creates a file
    const edit = this.pending.get(uri.query);
    if (edit) return edit.stale ? `${edit.stale}\n` : edit.proposedText;
    return "This Apprentice proposal is no longer pending (it was accepted, rejected or expired).\n";
  }

  provideCodeLenses(document: vscode.TextDocument): vscode.CodeLens[] {
    return proposalLenses(document, this.pending.values());
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
    this.decorations.dispose();
    this.lensChanged.dispose();
    this.contentChanged.dispose();
    this.pending.clear(); // their reviewEdit promises stay unresolved: nothing wrong is sent
  }

  // ---- internals ---------------------------------------------------------------------------

  private decide(edit: PendingEdit, index: number, accept: boolean): void {
    edit.review.decideHunk(index, accept);
    if (this.pending.has(edit.proposal.suggestion_id)) {
      this.listener.hunkDecided(edit.proposal.suggestion_id, index, accept);
      this.changed();
    }
  }

  private finish(edit: PendingEdit, decision: EditDecision): void {
    const id = edit.proposal.suggestion_id;
    if (!this.pending.delete(id)) return;
    this.log.info(
      `Edit of ${edit.proposal.path} ${decision.outcome}` +
        (decision.acceptedHunks ? ` (hunks ${decision.acceptedHunks.join(", ")})` : "") +
        (decision.reason ? ` — reason: ${decision.reason}` : "") +
        ".",
    );
    this.listener.editDecided(id, decision);
    edit.resolve(decision);
    this.changed();
    void this.closeDiff(edit);
  }

  /** The explicit edit, else the one shown in the active editor, else the newest. */
  private target(suggestionId?: string): PendingEdit | undefined {
    if (suggestionId !== undefined) {
      const edit = this.pending.get(suggestionId);
      if (!edit) void vscode.window.showInformationMessage("That edit is no longer waiting for a decision.");
      return edit;
    }
    const active = vscode.window.activeTextEditor?.document.uri.toString();
    const all = [...this.pending.values()];
    const shown = all.find((e) => e.fileUri.toString() === active || e.proposalUri.toString() === active);
    const edit = shown ?? all.sort((a, b) => b.createdAt - a.createdAt)[0];
    if (!edit) void vscode.window.showInformationMessage("No Apprentice edit is waiting for a decision.");
    return edit;
  }

  private hunkAtCursor(): [PendingEdit, number] | undefined {
    const editor = vscode.window.activeTextEditor;
    if (!editor) return undefined;
    const uri = editor.document.uri.toString();
    const line = editor.selection.active.line;
    for (const edit of this.pending.values()) {
      const onProposal = uri === edit.proposalUri.toString();
      if (!onProposal && uri !== edit.fileUri.toString()) continue;
      const index = hunkAtLine(edit.places, line, onProposal);
      if (index !== undefined) return [edit, index];
    }
    return undefined;
  }

  private changed(): void {
    void vscode.commands.executeCommand("setContext", CONTEXT_KEY, this.pending.size > 0);
    this.lensChanged.fire();
    this.decorate();
  }

  private decorate(): void {
    this.decorations.apply(this.pending.values());
  }

  private closeDiff(edit: PendingEdit): Promise<void> {
    return closeDiffTab(edit, this.log);
  }
}
