// The "Apprentice" output channel: one timestamped line per connection change, error and
// protocol error. Secrets registered with `redact` (the token) are masked in every line, so
// a message that happens to quote the token never reaches the log.
import * as vscode from "vscode";

export class Log implements vscode.Disposable {
  readonly channel: vscode.OutputChannel;
  private readonly secrets = new Set<string>();

  constructor(name = "Apprentice") {
    this.channel = vscode.window.createOutputChannel(name);
  }

  /** Never print `secret` (e.g. the server token); short strings are ignored as too common. */
  redact(secret: string | undefined): void {
    if (secret && secret.length >= 8) this.secrets.add(secret);
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
    let out = text;
    for (const secret of this.secrets) out = out.split(secret).join("***");
    return out;
  }
}

/** A one-line description of anything thrown. */
export function describeError(error: unknown): string {
  if (error instanceof Error) {
    const kind = (error as { kind?: unknown; code?: unknown }).kind ?? (error as { code?: unknown }).code;
    return typeof kind === "string" ? `${error.message} (${kind})` : error.message;
  }
  return String(error);
}
