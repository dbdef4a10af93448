// Shared helpers of the unit and integration tests: the package root (tests run from
// out/test/..., bundled), temp directories that are removed afterwards, and waiting.

import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

/** The vscode-extension directory (the one holding package.json). */
export function packageRoot(): string {
  let dir = __dirname;
  while (!existsSync(join(dir, "package.json"))) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`no package.json above ${__dirname}`);
    dir = up;
  }
  return dir;
}

/** A fresh temp directory; `cleanup()` removes it. */
export function tempDir(prefix = "apprentice-test-"): { path: string; cleanup: () => void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, cleanup: () => rmSync(path, { recursive: true, force: true }) };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Manual timers for OutcomeTracker: nothing fires until advance(). */
export class FakeTimers {
  now = 0;
  private next = 1;
  private readonly due = new Map<number, { at: number; fn: () => void }>();

  setTimeout = (fn: () => void, ms: number): unknown => {
    const id = this.next++;
    this.due.set(id, { at: this.now + ms, fn });
    return id;
  };

  clearTimeout = (handle: unknown): void => {
    this.due.delete(handle as number);
  };

  get pending(): number {
    return this.due.size;
  }

  /** Move the clock and run what came due, in order. */
  advance(ms: number): void {
    this.now += ms;
    for (;;) {
      const ready = [...this.due.entries()].filter(([, t]) => t.at <= this.now).sort((a, b) => a[1].at - b[1].at)[0];
      if (!ready) return;
      this.due.delete(ready[0]);
      ready[1].fn();
    }
  }
}
