// The "Apprentice" terminal: a Pseudoterminal that shows, live, the commands the agent runs
// (after the person approved them) and their output. It only displays; typing into it does
// nothing, since the commands run through core commandRunner, which returns their output.
import * as vscode from "vscode";

export class CommandTerminal implements vscode.Disposable {
  private terminal: vscode.Terminal | undefined;
  private readonly writer = new vscode.EventEmitter<string>();
  private opened: Promise<void> | undefined;
  private readonly closeListener: vscode.Disposable;

  constructor(private readonly name = "Apprentice") {
    this.closeListener = vscode.window.onDidCloseTerminal((t) => {
      if (t === this.terminal) {
        this.terminal = undefined;
        this.opened = undefined;
      }
    });
  }

  /** Show the terminal (making it if the person closed it) and wait until it can be written. */
  async reveal(): Promise<void> {
    if (!this.terminal) {
      let markOpen!: () => void;
      this.opened = new Promise<void>((resolve) => (markOpen = resolve));
      const pty: vscode.Pseudoterminal = {
        onDidWrite: this.writer.event,
        open: () => markOpen(),
        close: () => undefined,
        handleInput: () => undefined,
      };
      this.terminal = vscode.window.createTerminal({ name: this.name, pty });
      // A terminal that never opens (no panel) must not block the command: wait 2 s at most.
      const opened = this.opened;
      this.opened = Promise.race([opened, new Promise<void>((resolve) => setTimeout(resolve, 2000))]);
    }
    this.terminal.show(true);
    await this.opened;
  }

  /** Terminal text wants CRLF line ends. */
  write(text: string): void {
    this.writer.fire(text.replace(/\r?\n/g, "\r\n"));
  }

  header(command: string, cwd: string): void {
    this.write(`\x1b[1m$ ${command}\x1b[0m   \x1b[2m(in ${cwd})\x1b[0m\n`);
  }

  footer(exitCode: number | null, timedOut: boolean, truncated: boolean): void {
    const parts = [timedOut ? "timed out" : `exit code ${exitCode}`];
    if (truncated) parts.push("output truncated");
    this.write(`\x1b[2m[${parts.join(", ")}]\x1b[0m\n\n`);
  }

  dispose(): void {
    this.closeListener.dispose();
    this.terminal?.dispose();
    this.writer.dispose();
  }
}
