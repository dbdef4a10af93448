// End-to-end test of the Apprentice extension in a real code-server, driven by headless Chromium.
//
//   node vscode-extension/test/e2e/code-server.e2e.mjs
//
// Starts the scripted agent server (tests/vscode/scripted_server.py with tests/vscode/
// e2e_script.json), installs the .vsix into a throwaway code-server profile, opens a temp
// workspace in Chromium and runs "Apprentice: Open Chat". Turn 1: a prompt, the edit card and
// diff editor for a.py `x = 1` -> `x = 2`, a screenshot, Accept edit on the card, a.py checked
// on disk, the end of the turn, the status bar. Turn 2, in the same chat (editDecisions.mjs): a
// two-hunk edit of b.py decided hunk by hunk (CodeLens accept, card reject -> partially
// accepted, only hunk 1 on disk, a screenshot), then an edit of c.py rejected with a typed
// reason. Then an inline completion in d.py (inlineCompletion.mjs): shown, dismissed, other
// text typed in its place, and its "written" follow-up awaited in the database. Prints
// {"suggestion_id", "partial", "rejected", "completion", ...} as the last stdout line, for
// tests/vscode/test_code_server.py to look up in the database; progress goes to stderr.
// Exit 0 on success, 1 with the reason (plus failure.png and the logs) otherwise.
//
// Environment: APPRENTICE_E2E_VSIX (default vscode-extension/dist/apprentice.vsix),
// APPRENTICE_PYTHON (default <repo>/.venv/bin/python), APPRENTICE_TEST_DATABASE_URL (default a
// temp SQLite), APPRENTICE_E2E_ARTIFACTS (default <repo>/.artifacts/vscode-e2e),
// APPRENTICE_CODE_SERVER (default <repo>/.cache/code-server/node_modules/.bin/code-server),
// APPRENTICE_CHROMIUM (default /usr/bin/chromium), APPRENTICE_E2E_TIMEOUT_S (default 240).
import { appendFileSync, existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import {
  collectExtensionLogs, codeServerEnv, installExtension, prepareUserData, startCodeServer,
} from "./codeServer.mjs";
import { secondTurn, WORKSPACE_FILES } from "./editDecisions.mjs";
import { COMPLETION_FILES, rejectAndWrite } from "./inlineCompletion.mjs";
import { readJsonLine, startProcess, stopProcess, waitFor, withTimeout } from "./processes.mjs";
import { findFrameWith, launchBrowser, openWorkbench, runPaletteCommand, statusBarTexts } from "./workbench.mjs";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const env = process.env;
const config = {
  vsix: path.resolve(env.APPRENTICE_E2E_VSIX || path.join(REPO, "vscode-extension/dist/apprentice.vsix")),
  python: env.APPRENTICE_PYTHON || path.join(REPO, ".venv/bin/python"),
  databaseUrl: env.APPRENTICE_TEST_DATABASE_URL || "",
  artifacts: path.resolve(env.APPRENTICE_E2E_ARTIFACTS || path.join(REPO, ".artifacts/vscode-e2e")),
  codeServer: env.APPRENTICE_CODE_SERVER || path.join(REPO, ".cache/code-server/node_modules/.bin/code-server"),
  chromium: env.APPRENTICE_CHROMIUM || "/usr/bin/chromium",
  timeoutS: Number(env.APPRENTICE_E2E_TIMEOUT_S || 240),
  script: path.join(REPO, "tests/vscode/e2e_script.json"),
};
const PROMPT = "Set x to 2 in a.py";

const running = { server: undefined, codeServer: undefined, browser: undefined, page: undefined };
let tmp;

function step(message) {
  process.stderr.write(`[e2e ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

function checkPrerequisites() {
  const missing = [];
  if (!existsSync(config.codeServer)) missing.push(`code-server at ${config.codeServer}: run scripts/code-server.sh`);
  if (!existsSync(config.vsix)) missing.push(`the extension at ${config.vsix}: run scripts/extension.sh`);
  if (!existsSync(config.python)) missing.push(`Python at ${config.python}: run scripts/bootstrap.sh --dev`);
  if (!existsSync(config.chromium)) missing.push(`Chromium at ${config.chromium}: run scripts/system-deps.sh`);
  if (!Number.isFinite(config.timeoutS) || config.timeoutS <= 0) missing.push("APPRENTICE_E2E_TIMEOUT_S must be a positive number");
  if (missing.length) throw new Error(`cannot run the e2e test, missing:\n  - ${missing.join("\n  - ")}`);
}

async function startAgentServer(databaseUrl) {
  step(`starting the scripted agent server (database ${databaseUrl.replace(/\/\/[^@/]*@/, "//***@")})`);
  running.server = startProcess(
    "scripted agent server",
    config.python,
    ["-m", "tests.vscode.scripted_server", "--database-url", databaseUrl, "--home", path.join(tmp, "server-home"),
      "--script", config.script],
    { cwd: REPO, env: { ...env, PYTHONUNBUFFERED: "1" }, logPath: path.join(config.artifacts, "agent-server.log") },
  );
  const ready = await readJsonLine(running.server, 120_000);
  for (const key of ["ws_url", "token"]) {
    if (typeof ready[key] !== "string") throw new Error(`the server's ready line lacks "${key}": ${JSON.stringify(Object.keys(ready))}`);
  }
  step(`agent server ready at ${ready.ws_url}`);
  return ready;
}

async function run() {
  checkPrerequisites();
  const databaseUrl = config.databaseUrl || `sqlite:///${path.join(tmp, "feedback.db")}`;
  const ready = await startAgentServer(databaseUrl);

  const workspace = path.join(tmp, "workspace");
  const userData = path.join(tmp, "user-data");
  const extensions = path.join(tmp, "extensions");
  await mkdir(workspace, { recursive: true });
  for (const [name, text] of Object.entries({ ...WORKSPACE_FILES, ...COMPLETION_FILES })) {
    await writeFile(path.join(workspace, name), text);
  }
  await prepareUserData(userData, ready.ws_url);
  const csEnv = codeServerEnv(env, { token: ready.token, stateDir: tmp });

  step(`installing ${path.relative(REPO, config.vsix)} into code-server`);
  step(await installExtension({ codeServerBin: config.codeServer, vsixPath: config.vsix, userDataDir: userData, extensionsDir: extensions, env: csEnv }));
  const started = await startCodeServer({
    codeServerBin: config.codeServer, userDataDir: userData, extensionsDir: extensions, env: csEnv,
    logPath: path.join(config.artifacts, "code-server.log"), cwd: tmp,
  });
  running.codeServer = started.proc;
  step(`code-server on ${started.url}`);

  running.browser = await launchBrowser(config.chromium);
  const page = await running.browser.newPage({ viewport: { width: 1600, height: 1000 } });
  running.page = page;
  // Every frame's console (the workbench's and the chat webview's) goes to a file for failures.
  const consoleLog = path.join(config.artifacts, "browser-console.log");
  page.on("console", (message) => appendFileSync(consoleLog, `[${message.type()}] ${message.text()}\n`));
  page.on("pageerror", (error) => appendFileSync(consoleLog, `[pageerror] ${error.stack || error.message}\n`));
  await openWorkbench(page, started.url, workspace);
  step("workbench loaded");

  await runPaletteCommand(page, "Apprentice: Open Chat");
  // body[data-ready]: the webview's script has attached its handlers (the textarea exists
  // before it runs, and a click before that is lost).
  const chat = await findFrameWith(page, "body[data-ready] textarea#prompt", 60_000);
  step("chat webview found");

  await chat.locator("textarea#prompt").fill(PROMPT);
  await chat.locator("button#send").click();
  step(`sent "${PROMPT}"`);
  await waitFor("the user message in the chat", () => chat.locator(".msg.user", { hasText: PROMPT }).count(), { timeoutMs: 15_000 });

  const card = chat.locator(".edit-card").first();
  await card.waitFor({ state: "visible", timeout: 60_000 });
  const suggestionId = await card.getAttribute("data-suggestion-id");
  if (!suggestionId) throw new Error(".edit-card has no data-suggestion-id");
  const cardText = (await card.innerText()).replace(/\s+/g, " ");
  if (!cardText.includes("a.py")) throw new Error(`the edit card does not name a.py: ${cardText.slice(0, 300)}`);
  step(`edit card for suggestion ${suggestionId}`);

  const diffEditor = page.locator(".monaco-diff-editor").first();
  await diffEditor.waitFor({ state: "visible", timeout: 30_000 });
  const tabTitles = await page.locator(".tabs-container .tab").allInnerTexts();
  if (!tabTitles.some((title) => title.includes("Apprentice proposal"))) {
    throw new Error(`a diff editor opened but no tab is titled "… Apprentice proposal" (tabs: ${JSON.stringify(tabTitles)})`);
  }
  // Monaco draws the two sides a moment after the editor appears; wait for their text so the
  // screenshot shows the diff, and check it is the proposal (view lines use no-break spaces).
  const sideText = async (side) =>
    (await diffEditor.locator(`.editor.${side} .view-lines`).innerText()).replace(/\u00a0/g, " ");
  await waitFor("the diff editor to show x = 1 -> x = 2", async () =>
    (await sideText("original")).includes("x = 1") && (await sideText("modified")).includes("x = 2"),
  { timeoutMs: 20_000 }).catch(async (error) => {
    throw new Error(`${error.message} (original: ${JSON.stringify(await sideText("original").catch(() => "?"))}, ` +
      `modified: ${JSON.stringify(await sideText("modified").catch(() => "?"))})`);
  });
  step("diff editor open and drawn");
  const codeLenses = diffEditor.locator(".codelens-decoration", { hasText: "Accept edit" });
  await codeLenses.first().waitFor({ state: "visible", timeout: 20_000 }).catch(async () => {
    const shown = await diffEditor.locator(".codelens-decoration").allInnerTexts().catch(() => []);
    throw new Error(`no "Accept edit" CodeLens in the diff editor (CodeLens shown: ${JSON.stringify(shown)})`);
  });
  step(`CodeLens: ${(await diffEditor.locator(".codelens-decoration").first().innerText()).replace(/\s+/g, " ")}`);
  const screenshot = path.join(config.artifacts, "chat-with-diff.png");
  await page.screenshot({ path: screenshot });
  step(`screenshot ${screenshot}`);

  await card.locator("button.accept").click();
  step("clicked accept");
  const aPy = path.join(workspace, "a.py");
  await waitFor('a.py on disk to hold "x = 2"', async () => (await readFile(aPy, "utf8")) === "x = 2\n", { timeoutMs: 30_000 })
    .catch(async (error) => {
      throw new Error(`${error.message}; a.py holds ${JSON.stringify(await readFile(aPy, "utf8").catch(() => "(unreadable)"))}`);
    });
  step("a.py holds x = 2");
  await waitFor('the card\'s status "accepted"', async () => (await card.locator(".status").innerText()).trim().toLowerCase() === "accepted", { timeoutMs: 15_000 });

  const done = chat.locator(".msg.done").first();
  await done.waitFor({ state: "visible", timeout: 60_000 });
  const doneText = (await done.innerText()).replace(/\s+/g, " ").trim();
  step(`turn done: ${doneText}`);
  const errors = await chat.locator(".msg.error").allInnerTexts();
  if (errors.length) throw new Error(`the chat shows errors: ${JSON.stringify(errors)}`);

  const statusBar = await waitFor('a status bar item "Apprentice" that is connected', async () => {
    const texts = await statusBarTexts(page, "Apprentice");
    return texts.find((text) => !/offline|connecting|disconnected/i.test(text));
  }, { timeoutMs: 15_000 }).catch(async (error) => {
    throw new Error(`${error.message} (status bar items: ${JSON.stringify(await statusBarTexts(page, "Apprentice"))})`);
  });
  step(`status bar: ${statusBar}`);

  await page.screenshot({ path: path.join(config.artifacts, "after-accept.png") });

  const second = await secondTurn({ page, chat, workspace, artifacts: config.artifacts, step });
  const errorsAfter = await chat.locator(".msg.error").allInnerTexts();
  if (errorsAfter.length) throw new Error(`the chat shows errors after the second turn: ${JSON.stringify(errorsAfter)}`);
  await writeFile(path.join(config.artifacts, "chat.txt"), await chat.locator("#messages").innerText());

  const completion = await rejectAndWrite({
    page, artifacts: config.artifacts, step, python: config.python, repo: REPO, databaseUrl,
  });
  return {
    suggestion_id: suggestionId, status_bar: statusBar, done: doneText, screenshot,
    partial: second.partial, rejected: second.rejected, second_done: second.done, completion,
  };
}

async function reportFailure(error) {
  process.stderr.write(`\n[e2e] FAILED: ${error?.stack || error}\n`);
  if (running.page) {
    const failureShot = path.join(config.artifacts, "failure.png");
    await withTimeout(running.page.screenshot({ path: failureShot }), 15_000, "the failure screenshot")
      .then(() => process.stderr.write(`[e2e] screenshot of the failure: ${failureShot}\n`))
      .catch((e) => process.stderr.write(`[e2e] no failure screenshot: ${e.message}\n`));
  }
  const logs = [running.server, running.codeServer].filter(Boolean).map((proc) => [proc.name, proc.logPath]);
  logs.push(["browser console", path.join(config.artifacts, "browser-console.log")]);
  for (const [name, logPath] of logs) {
    const log = await readFile(logPath, "utf8").catch(() => "");
    process.stderr.write(`\n[e2e] ---- ${name} log (${logPath}), last 6000 chars ----\n${log.slice(-6000)}\n`);
  }
}

async function cleanUp() {
  if (running.browser) await withTimeout(running.browser.close(), 15_000, "closing Chromium").catch((e) => step(e.message));
  await stopProcess(running.codeServer);
  await stopProcess(running.server);
}

/** Remove what an earlier run left in the artifacts dir (only our own file names). */
async function clearOldArtifacts() {
  await mkdir(config.artifacts, { recursive: true });
  for (const name of await readdir(config.artifacts)) {
    if (/^(chat-with-diff|after-accept|hunk-1-accepted|partial-decision|completion-shown|failure)\.png$|^(agent-server|code-server|browser-console|apprentice-output-\d+)\.log$|^chat\.txt$/.test(name)) {
      await rm(path.join(config.artifacts, name), { force: true });
    }
  }
}

async function main() {
  await clearOldArtifacts();
  tmp = await mkdtemp(path.join(os.tmpdir(), "apprentice-e2e-"));
  let result;
  let failure;
  try {
    result = await withTimeout(run(), config.timeoutS * 1000, "the e2e test");
  } catch (error) {
    failure = error;
    await reportFailure(error);
  }
  // The extension's OutputChannel is written to disk by VS Code; keep it whatever happened.
  const extensionLog = await collectExtensionLogs(path.join(tmp, "user-data"), config.artifacts).catch((e) => `(${e.message})`);
  if (failure) process.stderr.write(`\n[e2e] ---- extension OutputChannel "Apprentice" ----\n${extensionLog || "(none found)"}\n`);
  await cleanUp();
  if (failure) {
    process.stderr.write(`[e2e] temp dir kept for inspection: ${tmp}\n`);
    process.stderr.write(`[e2e] FAILED: ${failure.message}\n`);
    return 1;
  }
  await rm(tmp, { recursive: true, force: true });
  process.stdout.write(`${JSON.stringify(result)}\n`);
  return 0;
}

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, () => {
    step(`${signal}: stopping everything`);
    cleanUp().finally(() => process.exit(1));
  });
}

process.exitCode = await main();
// Playwright or a stray handle must not keep the process alive after cleanup.
setTimeout(() => process.exit(process.exitCode), 1000).unref();
