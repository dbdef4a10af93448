// The editor context sent with each user.message: the active file (workspace-relative), its
// language, the selection with its text, and the file's errors and warnings (at most 20).
import * as vscode from "vscode";
import type { Diagnostic, EditorContext } from "../protocol/messages";
import { relativePath } from "./workspacePaths";

const MAX_DIAGNOSTICS = 20;
const MAX_SELECTION_CHARS = 20_000; // a whole-file selection should not fill the frame

export function currentEditorContext(): EditorContext | undefined {
  const editor = vscode.window.activeTextEditor;
  if (!editor) return undefined;
  const doc = editor.document;
  const rel = relativePath(doc.uri);
  if (!rel) return undefined; // not a workspace file: nothing the agent can open
  const context: EditorContext = { path: rel, language: doc.languageId };
  const sel = editor.selection;
  if (!sel.isEmpty) {
    let text = doc.getText(sel);
    if (text.length > MAX_SELECTION_CHARS) text = text.slice(0, MAX_SELECTION_CHARS);
    context.selection = {
      start: { line: sel.start.line, character: sel.start.character },
      end: { line: sel.end.line, character: sel.end.character },
      text,
    };
  }
  const diagnostics: Diagnostic[] = [];
  for (const d of vscode.languages.getDiagnostics(doc.uri)) {
    if (d.severity !== vscode.DiagnosticSeverity.Error && d.severity !== vscode.DiagnosticSeverity.Warning) continue;
    diagnostics.push({
      path: rel,
      line: d.range.start.line,
      severity: d.severity === vscode.DiagnosticSeverity.Error ? "error" : "warning",
      message: d.message,
      source: d.source ?? null,
    });
  }
  // Errors first: when there are more than 20, the errors are what the agent needs.
  diagnostics.sort((a, b) => (a.severity === b.severity ? 0 : a.severity === "error" ? -1 : 1));
  if (diagnostics.length) context.diagnostics = diagnostics.slice(0, MAX_DIAGNOSTICS);
  return context;
}
