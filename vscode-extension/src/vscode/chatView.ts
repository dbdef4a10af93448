// The chat view ("apprentice.chat"): a WebviewViewProvider whose page (markup here, script and
// style in media/chat.js and chat.css) runs under a strict CSP (scripts only with this load's nonce,
// resources only from media/). Messages are held back until the page says "ready", then the
// whole transcript is replayed, so a re-created view shows what the old one did.
import { randomBytes } from "node:crypto";
import * as vscode from "vscode";
import { parseFromWebview, type FromWebview, type ToWebview } from "../core/chatMessages";

export const CHAT_VIEW_ID = "apprentice.chat";

export class ChatViewProvider implements vscode.WebviewViewProvider {
  private view: vscode.WebviewView | undefined;
  private ready = false;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly onMessage: (m: FromWebview) => void,
    private readonly onReady: () => void,
  ) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    this.ready = false;
    const media = vscode.Uri.joinPath(this.extensionUri, "media");
    view.webview.options = { enableScripts: true, localResourceRoots: [media] };
    view.webview.html = this.html(view.webview, media);
    view.webview.onDidReceiveMessage((raw) => {
      const m = parseFromWebview(raw);
      if (!m) return;
      if (m.type === "ready") {
        this.ready = true;
        this.onReady();
      } else {
        this.onMessage(m);
      }
    });
    view.onDidDispose(() => {
      if (this.view === view) {
        this.view = undefined;
        this.ready = false;
      }
    });
  }

  /** Post to the page once it is ready (earlier messages come with the replay). */
  post(m: ToWebview): void {
    if (this.view && this.ready) void this.view.webview.postMessage(m);
  }

  async reveal(): Promise<void> {
    await vscode.commands.executeCommand("workbench.view.extension.apprentice");
    await vscode.commands.executeCommand(`${CHAT_VIEW_ID}.focus`);
  }

  private html(webview: vscode.Webview, media: vscode.Uri): string {
    const nonce = randomBytes(16).toString("base64");
    const script = webview.asWebviewUri(vscode.Uri.joinPath(media, "chat.js"));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(media, "chat.css"));
    const csp = [
      "default-src 'none'",
      `style-src ${webview.cspSource}`,
      `img-src ${webview.cspSource} data:`,
      `font-src ${webview.cspSource}`,
      `script-src 'nonce-${nonce}'`,
    ].join("; ");
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style}">
<title>Apprentice</title>
</head>
<body>
<div id="toolbar">
  <span id="connection" data-state="offline">offline</span>
  <button type="button" id="cancel" hidden title="Stop the running turn">Stop</button>
  <button type="button" id="new-session" title="Start a new session">New session</button>
</div>
<div id="messages" role="log" aria-live="polite"></div>
<div id="composer">
  <textarea id="prompt" rows="3" placeholder="Ask Apprentice… (Enter sends, Shift+Enter for a new line)"></textarea>
  <button type="button" id="send">Send</button>
</div>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
  }
}
