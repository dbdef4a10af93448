// code-server for the end-to-end test: a throwaway user-data dir with quiet settings, the .vsix
// installed into a throwaway extensions dir, the server on a free loopback port, and the logs
// (code-server's own and the extension's OutputChannel) gathered when the test ends.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { copyFile, mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";

import { freePort, startProcess, waitFor } from "./processes.mjs";

const execFileAsync = promisify(execFile);

/** Settings that keep dialogs and tabs out of the way, and point the extension at our server. */
export function userSettings(serverUrl) {
  return {
    "security.workspace.trust.enabled": false,
    "workbench.startupEditor": "none",
    "workbench.welcomePage.walkthroughs.openOnInstall": false,
    "workbench.tips.enabled": false,
    "workbench.enableExperiments": false,
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "extensions.autoCheckUpdates": false,
    "extensions.autoUpdate": false,
    "extensions.ignoreRecommendations": true,
    "git.enabled": false,
    "apprentice.serverUrl": serverUrl,
    "apprentice.autoStartServer": false,
    // The completion test triggers its ghost text itself; the scripted model answers any
    // other completion request with an empty suggestion (nothing shown).
    "apprentice.inlineCompletions.enabled": true,
    // Follow-ups (persisted, written) after 2 s, not 30: the test waits for a written one.
    "apprentice.outcomeSettleSeconds": 2,
    // Nothing else pops up or types while the test types at the completion's place.
    "editor.quickSuggestions": { "other": "off", "comments": "off", "strings": "off" },
    "editor.suggestOnTriggerCharacters": false,
    "editor.wordBasedSuggestions": "off",
    "editor.autoClosingBrackets": "never",
    "editor.autoClosingQuotes": "never",
  };
}

/**
 * The environment code-server runs in: the token for the extension (it reads APPRENTICE_TOKEN
 * when SecretStorage has none), its own HOME-like dirs, and no VSCODE_* variables — inside a VS
 * Code terminal VSCODE_IPC_HOOK_CLI would send `--install-extension` to that other VS Code.
 */
export function codeServerEnv(baseEnv, { token, stateDir }) {
  const env = Object.fromEntries(Object.entries(baseEnv).filter(([key]) => !key.startsWith("VSCODE_")));
  return {
    ...env,
    APPRENTICE_TOKEN: token,
    APPRENTICE_HOME: path.join(stateDir, "apprentice-home"),
    XDG_CONFIG_HOME: path.join(stateDir, "xdg-config"),
    XDG_DATA_HOME: path.join(stateDir, "xdg-data"),
    XDG_CACHE_HOME: path.join(stateDir, "xdg-cache"),
  };
}

export async function prepareUserData(userDataDir, serverUrl) {
  await mkdir(path.join(userDataDir, "User"), { recursive: true });
  await writeFile(
    path.join(userDataDir, "User", "settings.json"),
    JSON.stringify(userSettings(serverUrl), null, 2),
  );
}

export async function installExtension({ codeServerBin, vsixPath, userDataDir, extensionsDir, env }) {
  if (!existsSync(vsixPath)) {
    throw new Error(`no .vsix at ${vsixPath}: run scripts/extension.sh (or set APPRENTICE_E2E_VSIX)`);
  }
  try {
    const { stdout, stderr } = await execFileAsync(
      codeServerBin,
      ["--user-data-dir", userDataDir, "--extensions-dir", extensionsDir, "--install-extension", vsixPath],
      { env, timeout: 120_000, killSignal: "SIGKILL" },
    );
    return `${stdout}${stderr}`.trim();
  } catch (error) {
    throw new Error(`code-server --install-extension ${vsixPath} failed: ${error.message}\n${error.stdout ?? ""}${error.stderr ?? ""}`);
  }
}

/** Start code-server (no auth, loopback only) and wait until /healthz answers. */
export async function startCodeServer({ codeServerBin, userDataDir, extensionsDir, env, logPath, cwd }) {
  const port = await freePort();
  const proc = startProcess(
    "code-server",
    codeServerBin,
    [
      "--auth", "none",
      "--bind-addr", `127.0.0.1:${port}`,
      "--disable-telemetry",
      "--disable-update-check",
      "--disable-workspace-trust",
      "--user-data-dir", userDataDir,
      "--extensions-dir", extensionsDir,
    ],
    { cwd, env, logPath },
  );
  const url = `http://127.0.0.1:${port}`;
  let exited = false;
  proc.exited.then(() => { exited = true; });
  await waitFor(`code-server to answer ${url}/healthz`, async () => {
    if (exited) throw new Error(`code-server exited; log: ${logPath}`);
    const response = await fetch(`${url}/healthz`);
    return response.ok;
  }, { timeoutMs: 60_000, intervalMs: 500 });
  return { proc, url, port };
}

/**
 * The extension's OutputChannel as VS Code logs it to disk
 * (<user-data>/logs/<session>/window*\/exthost/output_logging_*\/N-Apprentice.log).
 */
export async function findOutputChannelLogs(userDataDir, channelName = "Apprentice") {
  const found = [];
  async function walk(dir, depth) {
    if (depth > 6) return;
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) await walk(full, depth + 1);
      else if (entry.name.endsWith(`-${channelName}.log`)) found.push(full);
    }
  }
  await walk(path.join(userDataDir, "logs"), 0);
  return found.sort();
}

/** Copy the extension's OutputChannel logs into artifactsDir; returns their text joined. */
export async function collectExtensionLogs(userDataDir, artifactsDir) {
  const logs = await findOutputChannelLogs(userDataDir);
  const texts = [];
  for (const [index, file] of logs.entries()) {
    const target = path.join(artifactsDir, `apprentice-output-${index + 1}.log`);
    await copyFile(file, target).catch(() => undefined);
    texts.push(`--- ${file}\n${await readFile(file, "utf8").catch((e) => `(unreadable: ${e.message})`)}`);
  }
  return texts.join("\n");
}
