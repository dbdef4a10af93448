// Asking the person before the agent runs a command: a modal "Apprentice wants to run: <cmd>"
// [Run] [Don't run]. An approval given for a command.approval.request is remembered (once) so
// the run_command tool request that follows for that exact command does not ask again; a
// run_command that arrives without one asks the same question first.
import * as vscode from "vscode";
import type { Log } from "./log";

export const RUN = "Run";
export const DONT_RUN = "Don't run";

export class CommandApprovals {
  private readonly approved = new Map<string, number>();

  constructor(
    private readonly log: Log,
    private readonly cwd: () => string | undefined,
  ) {}

  /** The modal question; true only for an explicit "Run". */
  async ask(command: string): Promise<boolean> {
    const where = this.cwd();
    const answer = await vscode.window.showWarningMessage(
      `Apprentice wants to run: ${command}`,
      { modal: true, detail: where ? `In ${where}, through /bin/sh -c. Output appears in the "Apprentice" terminal.` : undefined },
      RUN,
      DONT_RUN,
    );
    const approved = answer === RUN;
    this.log.info(`Command ${approved ? "approved" : "declined"}: ${command}`);
    return approved;
  }

  /** For command.approval.request: ask, and remember a yes for the run_command that follows. */
  async approve(command: string): Promise<boolean> {
    const approved = await this.ask(command);
    if (approved) this.approved.set(command, (this.approved.get(command) ?? 0) + 1);
    return approved;
  }

  /** For run_command: use up a remembered approval of this exact command, else ask now. */
  async permit(command: string): Promise<boolean> {
    const count = this.approved.get(command) ?? 0;
    if (count > 0) {
      if (count === 1) this.approved.delete(command);
      else this.approved.set(command, count - 1);
      return true;
    }
    return this.ask(command);
  }

  /** A new session or connection: approvals given to the old one do not carry over. */
  clear(): void {
    this.approved.clear();
  }
}
