// The inline-completion part of the end-to-end test: a completion the person does not take,
// and what they write in its place reported as its "written" follow-up.
//
// d.py holds `def total(a, b):\n    return `. tests/vscode/e2e_script.json answers a completion
// prompt ending there with " 0" (ghost text "0") and any other with "\n" (an empty suggestion).
// The test opens d.py, puts the cursor at its end and runs "Trigger Inline Suggestion"; once
// the ghost text shows (screenshot completion-shown.png) it presses Escape and types `a + b`
// there: the completion is rejected. It triggers once more after that (an empty suggestion,
// which must show nothing), then waits until the database holds the completion's `written`
// follow-up (codeServer.mjs sets a short apprentice.outcomeSettleSeconds), read with
// tests/vscode/dump_outcomes.py. tests/vscode/test_code_server.py checks the rows.
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";

import { sleep, waitFor } from "./processes.mjs";
import { runPaletteCommand } from "./workbench.mjs";

const execFileAsync = promisify(execFile);

export const COMPLETION_FILES = { "d.py": "def total(a, b):\n    return " };
export const SHOWN_TEXT = "0";
export const WRITTEN_TEXT = "a + b";

const viewText = async (locator) => (await locator.innerText()).replace(/\u00a0/g, " ");

/** Every inline completion in the database with its outcomes (dump_outcomes --completions). */
async function storedCompletions({ python, repo, databaseUrl }) {
  const { stdout } = await execFileAsync(
    python, ["-m", "tests.vscode.dump_outcomes", "--database-url", databaseUrl, "--completions"],
    { cwd: repo, timeout: 60_000 },
  );
  return JSON.parse(stdout).suggestions;
}

export async function rejectAndWrite({ page, artifacts, step, python, repo, databaseUrl }) {
  await runPaletteCommand(page, "Go to File");
  const quickOpen = page.locator(".quick-input-widget");
  await quickOpen.locator("input.input").fill("d.py");
  await quickOpen.locator(".monaco-list-row", { hasText: "d.py" }).first().waitFor({ state: "visible", timeout: 15_000 });
  await quickOpen.locator("input.input").press("Enter");
  const editor = page.locator(".monaco-editor", { has: page.locator(".view-lines", { hasText: "total(a," }) }).first();
  await editor.waitFor({ state: "visible", timeout: 20_000 });
  const lines = editor.locator(".view-lines");
  await lines.click();
  await page.keyboard.press("Control+End");
  step("d.py open, cursor after `return `");

  await runPaletteCommand(page, "Trigger Inline Suggestion");
  const ghost = editor.locator('[class*="ghost-text"]', { hasText: SHOWN_TEXT });
  await ghost.first().waitFor({ state: "visible", timeout: 20_000 }).catch(async () => {
    throw new Error(`no ghost text "${SHOWN_TEXT}" after "Trigger Inline Suggestion" (d.py shows ` +
      `${JSON.stringify(await viewText(lines).catch(() => "?"))})`);
  });
  await page.screenshot({ path: path.join(artifacts, "completion-shown.png") });
  step(`ghost text "${SHOWN_TEXT}" shown`);

  await page.keyboard.press("Escape");
  await page.keyboard.type(WRITTEN_TEXT, { delay: 30 });
  await waitFor(`d.py to show "return ${WRITTEN_TEXT}"`, async () => (await viewText(lines)).includes(`return ${WRITTEN_TEXT}`), { timeoutMs: 10_000 })
    .catch(async (error) => {
      throw new Error(`${error.message}; it shows ${JSON.stringify(await viewText(lines).catch(() => "?"))}`);
    });
  step(`dismissed it and typed "${WRITTEN_TEXT}" in its place`);

  // Asked again here, the model has nothing to say (""): nothing may show.
  await runPaletteCommand(page, "Trigger Inline Suggestion");
  await sleep(1000);
  if (await editor.locator('[class*="ghost-text"]:visible').count()) {
    throw new Error(`ghost text shows for an empty suggestion: ${JSON.stringify(await viewText(lines))}`);
  }

  let seen = [];
  const written = await waitFor("the completion's written follow-up in the database", async () => {
    seen = await storedCompletions({ python, repo, databaseUrl });
    const done = seen.filter((s) => s.proposed === SHOWN_TEXT && s.outcomes.some((o) => o.kind === "written"));
    const empty = seen.filter((s) => s.proposed === "");
    return done.length && empty.length ? { suggestion: done[done.length - 1], empty } : undefined;
  }, { timeoutMs: 45_000, intervalMs: 1000 }).catch((error) => {
    const rows = seen.map((s) => ({ proposed: s.proposed, outcomes: s.outcomes.map((o) => [o.kind, o.final_text]) }));
    throw new Error(`${error.message}; stored completions: ${JSON.stringify(rows)}`);
  });
  const finalText = written.suggestion.outcomes.find((o) => o.kind === "written").final_text;
  step(`completion ${written.suggestion.id}: ${written.suggestion.outcomes.map((o) => o.kind).join(", ")} ` +
    `(written ${JSON.stringify(finalText)}); ${written.empty.length} empty suggestion(s) stored`);
  return { suggestion_id: written.suggestion.id, written: finalText, empty_ids: written.empty.map((s) => s.id) };
}
