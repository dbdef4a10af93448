// Reconnect delays: the first retry after `firstMs`, each next one twice as late, never more
// than `maxMs`; a successful connection (or an explicit connect) starts over.

export class Backoff {
  private nextMs: number;

  constructor(
    readonly firstMs = 1000,
    readonly maxMs = 30_000,
  ) {
    if (!(firstMs > 0) || !(maxMs >= firstMs)) throw new RangeError(`Backoff needs 0 < firstMs <= maxMs, got ${firstMs} and ${maxMs}.`);
    this.nextMs = firstMs;
  }

  /** The delay to wait now; the one after it doubles. */
  next(): number {
    const delay = this.nextMs;
    this.nextMs = Math.min(this.nextMs * 2, this.maxMs);
    return delay;
  }

  reset(): void {
    this.nextMs = this.firstMs;
  }
}
