// The "Apprentice" output channel: one timestamped line per connection change, error and
// protocol error. Secrets registered with `redact` (the token) are masked in every line, so
// a message that happens to quote the token never reaches the log.
import * as vscode from "vscode";
import { Redactor, describeError } from "../core/redact";

export { describeError } from "../core/redact";

export class Log implements vscode.Disposable {
  readonly channel: vscode.OutputChannel;
  private readonly redactor = new Redactor();

  constructor(name = "Apprentice") {
    this.channel = vscode.window.createOutputChannel(name);
  }

  /** Never print `secret` (e.g. the server token); short strings are ignored as too common. */
  redact(secret: string | undefined): void {
    this.redactor.add(secret);
  }

  info(message: string): void {
    this.write("info", message);
  }

  warn(message: string): void {
    this.write("warn", message);
  }

  error(message: string, error?: unknown): void {
    this.write("error", error === undefined ? message : `${message}: ${describeError(error)}`);
  }

  /** Raw output of a child process (the auto-started server), line by line. */
  raw(prefix: string, chunk: string): void {
    for (const line of chunk.split(/\r?\n/)) {
      if (line.trim()) this.channel.appendLine(this.mask(`${prefix} ${line}`));
    }
  }

  show(): void {
    this.channel.show(true);
  }

  dispose(): void {
    this.channel.dispose();
  }

  private write(level: string, message: string): void {
    const time = new Date().toISOString().slice(11, 23);
    this.channel.appendLine(this.mask(`${time} [${level}] ${message}`));
  }

  private mask(text: string): string {
    return this.redactor.mask(text);
  }
}
