// How pending edit proposals look in the editor (editReview.ts owns their life): the
// PendingEdit record, the CodeLens above the edit and each hunk, the removed / added line
// decorations on both sides of the diff, and closing a proposal's diff tab.
import * as vscode from "vscode";
import type { ProposalReview } from "../core/hunks";
import type { HunkPlace } from "../core/hunkPlacement";
import type { EditDecision } from "../core/session";
import type { EditProposed } from "../protocol/messages";
import type { Log } from "./log";

export const PROPOSAL_SCHEME = "apprentice-proposal";

export interface PendingEdit {
  proposal: EditProposed;
  fileUri: vscode.Uri; // the real file, or an empty proposal-scheme document when it does not exist
  proposalUri: vscode.Uri;
  proposedText: string;
  review: ProposalReview;
  places: HunkPlace[]; // empty when stale
  /** Set when the file changed under the proposal: shown on the card, no diff editor. */
  stale?: string;
  resolve: (d: EditDecision) => void;
  createdAt: number;
}

/** The CodeLens of the pending proposals shown in `document` (the real file or the proposal). */
export function proposalLenses(document: vscode.TextDocument, pending: Iterable<PendingEdit>): vscode.CodeLens[] {
  const lenses: vscode.CodeLens[] = [];
  for (const edit of pending) {
    const onProposal = document.uri.toString() === edit.proposalUri.toString();
    if (!onProposal && document.uri.toString() !== edit.fileUri.toString()) continue;
    const id = edit.proposal.suggestion_id;
    const top = new vscode.Range(0, 0, 0, 0);
    lenses.push(
      new vscode.CodeLens(top, { title: "✓ Accept edit", command: "apprentice.acceptEdit", arguments: [id] }),
      new vscode.CodeLens(top, { title: "✗ Reject edit", command: "apprentice.rejectEdit", arguments: [id] }),
    );
    for (const place of edit.places) {
      const line = Math.min(Math.max(onProposal ? place.newStart : place.oldStart, 0), Math.max(document.lineCount - 1, 0));
      const at = new vscode.Range(line, 0, line, 0);
      const n = place.index + 1;
      const state = edit.review.decided(place.index);
      if (state === undefined) {
        lenses.push(
          new vscode.CodeLens(at, { title: `✓ Accept hunk ${n}`, command: "apprentice.acceptHunk", arguments: [id, place.index] }),
          new vscode.CodeLens(at, { title: `✗ Reject hunk ${n}`, command: "apprentice.rejectHunk", arguments: [id, place.index] }),
        );
      } else {
        lenses.push(new vscode.CodeLens(at, { title: `Hunk ${n} ${state ? "accepted" : "rejected"}`, command: "" }));
      }
    }
  }
  return lenses;
}

/** Removed lines on the real file, added lines on the proposal, for undecided hunks. */
export class ProposalDecorations implements vscode.Disposable {
  private readonly removed = vscode.window.createTextEditorDecorationType({
    isWholeLine: true,
    backgroundColor: new vscode.ThemeColor("diffEditor.removedLineBackground"),
    overviewRulerColor: new vscode.ThemeColor("editorOverviewRuler.deletedForeground"),
    overviewRulerLane: vscode.OverviewRulerLane.Left,
  });
  private readonly added = vscode.window.createTextEditorDecorationType({
    isWholeLine: true,
    backgroundColor: new vscode.ThemeColor("diffEditor.insertedLineBackground"),
    overviewRulerColor: new vscode.ThemeColor("editorOverviewRuler.addedForeground"),
    overviewRulerLane: vscode.OverviewRulerLane.Left,
  });

  /** Decorate every visible editor for the pending proposals. */
  apply(pending: Iterable<PendingEdit>): void {
    const edits = [...pending];
    for (const editor of vscode.window.visibleTextEditors) {
      const uri = editor.document.uri.toString();
      const removed: vscode.Range[] = [];
      const added: vscode.Range[] = [];
      for (const edit of edits) {
        const onProposal = uri === edit.proposalUri.toString();
        const onFile = uri === edit.fileUri.toString();
        if (!onProposal && !onFile) continue;
        for (const p of edit.places) {
          if (edit.review.decided(p.index) !== undefined) continue;
          if (onFile) for (const l of p.removedLines) removed.push(new vscode.Range(l, 0, l, 0));
          if (onProposal) for (const l of p.addedLines) added.push(new vscode.Range(l, 0, l, 0));
        }
      }
      editor.setDecorations(this.removed, removed);
      editor.setDecorations(this.added, added);
    }
  }

  dispose(): void {
    this.removed.dispose();
    this.added.dispose();
  }
}

/** Close the diff tab of a decided or expired proposal. */
export async function closeDiffTab(edit: PendingEdit, log: Log): Promise<void> {
  const wanted = edit.proposalUri.toString();
  const tabs = vscode.window.tabGroups.all
    .flatMap((g) => g.tabs)
    .filter((t) => t.input instanceof vscode.TabInputTextDiff && t.input.modified.toString() === wanted);
  try {
    if (tabs.length) await vscode.window.tabGroups.close(tabs, true);
  } catch (error) {
    log.error("Could not close the proposal's diff", error);
  }
}
