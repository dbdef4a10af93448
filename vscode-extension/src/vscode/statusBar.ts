// The status bar item: "$(hubot) Apprentice" with the connection state, and once connected
// the model and adapter from `welcome` ("Apprentice: dev-model · adapter v3"). A click opens
// the chat, or connects when offline.
import * as vscode from "vscode";
import type { Welcome } from "../protocol/messages";

export type ConnectionState = "offline" | "connecting" | "connected";

export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;

  constructor() {
    this.item = vscode.window.createStatusBarItem("apprentice.status", vscode.StatusBarAlignment.Right, 100);
    this.item.name = "Apprentice";
    this.show("offline");
    this.item.show();
  }

  show(state: ConnectionState, details: { welcome?: Welcome; serverUrl?: string; problem?: string } = {}): void {
    const { welcome, serverUrl, problem } = details;
    const tooltip = new vscode.MarkdownString(undefined, true);
    tooltip.isTrusted = false;
    tooltip.appendText(`Apprentice — ${state}\n\n`);
    if (serverUrl) tooltip.appendText(`Server: ${serverUrl}\n\n`);
    if (state === "connected" && welcome) {
      this.item.text = `$(hubot) ${describeModel(welcome)}`;
      tooltip.appendText(`Model: ${welcome.model}\n\nAdapter: ${welcome.adapter ?? "none (base model)"}\n\nServer version: ${welcome.server}\n\n`);
      tooltip.appendText("Click to open the chat.");
      this.item.command = "apprentice.openChat";
      this.item.backgroundColor = undefined;
    } else if (state === "connecting") {
      this.item.text = "$(sync~spin) Apprentice: connecting…";
      tooltip.appendText("Click to open the chat.");
      this.item.command = "apprentice.openChat";
      this.item.backgroundColor = undefined;
    } else {
      this.item.text = "$(hubot) Apprentice: offline";
      if (problem) tooltip.appendText(`${problem}\n\n`);
      tooltip.appendText("Click to connect.");
      this.item.command = "apprentice.connect";
      this.item.backgroundColor = new vscode.ThemeColor("statusBarItem.warningBackground");
    }
    this.item.tooltip = tooltip;
  }

  dispose(): void {
    this.item.dispose();
  }
}

/** "Apprentice: dev-model · adapter v3" (no adapter part when the base model serves). */
export function describeModel(welcome: Welcome): string {
  return welcome.adapter ? `Apprentice: ${welcome.model} · adapter ${welcome.adapter}` : `Apprentice: ${welcome.model}`;
}
