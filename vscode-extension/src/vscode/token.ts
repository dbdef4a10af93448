// Where the server token comes from: SecretStorage ("apprentice.token", set by the command
// "Apprentice: Set Server Token"), else $APPRENTICE_TOKEN, else $APPRENTICE_HOME/token (default
// ~/.apprentice/token), the file a local `apprentice serve` writes on its first start.
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import * as vscode from "vscode";

export const TOKEN_SECRET_KEY = "apprentice.token";

export type TokenSource = "secret storage" | "APPRENTICE_TOKEN" | "token file" | "none";

export interface ResolvedToken {
  token?: string;
  source: TokenSource;
}

export function tokenFilePath(env: NodeJS.ProcessEnv = process.env): string {
  const home = env.APPRENTICE_HOME?.trim() || path.join(os.homedir(), ".apprentice");
  return path.join(home, "token");
}

export async function resolveToken(secrets: vscode.SecretStorage, env: NodeJS.ProcessEnv = process.env): Promise<ResolvedToken> {
  const stored = (await secrets.get(TOKEN_SECRET_KEY))?.trim();
  if (stored) return { token: stored, source: "secret storage" };
  const fromEnv = env.APPRENTICE_TOKEN?.trim();
  if (fromEnv) return { token: fromEnv, source: "APPRENTICE_TOKEN" };
  try {
    const fromFile = (await fs.readFile(tokenFilePath(env), "utf8")).trim();
    if (fromFile) return { token: fromFile, source: "token file" };
  } catch {
    // No token file: the server may not need one yet, or has not started.
  }
  return { source: "none" };
}

/** The command apprentice.setToken: a password box; an empty answer clears the stored token. */
export async function promptForToken(secrets: vscode.SecretStorage): Promise<"set" | "cleared" | "cancelled"> {
  const value = await vscode.window.showInputBox({
    title: "Apprentice: Set Server Token",
    prompt: `The agent server's token (from ${tokenFilePath()} on the server machine). Leave empty to forget the stored one.`,
    password: true,
    ignoreFocusOut: true,
  });
  if (value === undefined) return "cancelled";
  if (!value.trim()) {
    await secrets.delete(TOKEN_SECRET_KEY);
    return "cleared";
  }
  await secrets.store(TOKEN_SECRET_KEY, value.trim());
  return "set";
}
