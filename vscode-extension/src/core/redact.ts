// Secrets kept out of log lines (the server token), and one-line descriptions of errors: the
// pure half of the "Apprentice" output channel (src/vscode/log.ts), unit-tested here.

/** Strings shorter than this are not masked: they would mask ordinary words. */
export const MIN_SECRET_LENGTH = 8;

export class Redactor {
  private readonly secrets = new Set<string>();

  /** Never show `secret` again; short or empty ones are ignored as too common. */
  add(secret: string | undefined): void {
    if (secret && secret.length >= MIN_SECRET_LENGTH) this.secrets.add(secret);
  }

  /** `text` with every registered secret replaced by "***". */
  mask(text: string): string {
    let out = text;
    for (const secret of this.secrets) out = out.split(secret).join("***");
    return out;
  }
}

/** A one-line description of anything thrown (with its kind or code when it has one). */
export function describeError(error: unknown): string {
  if (error instanceof Error) {
    const kind = (error as { kind?: unknown; code?: unknown }).kind ?? (error as { code?: unknown }).code;
    return typeof kind === "string" ? `${error.message} (${kind})` : error.message;
  }
  return String(error);
}
