// The second chat turn of the end-to-end test: per-hunk decisions and a rejection with a reason.
//
// tests/vscode/e2e_script.json replies to the second message with an edit of b.py whose two
// changes are 10 lines apart (two hunks) and then an edit of c.py. Hunk 1 is accepted with the
// "Accept hunk 1" CodeLens in the diff editor, hunk 2 rejected with the chat card's ✗, so only
// hunk 1 reaches the disk; the c.py edit is rejected from its card with a reason typed into the
// quick input. Screenshots: hunk-1-accepted.png (the diff half decided), partial-decision.png
// (the card "partially accepted"). The workspace files here must match the script's search texts.
import { readFile } from "node:fs/promises";
import path from "node:path";

import { waitFor } from "./processes.mjs";

/** Lines 10 apart: difflib (3 lines of context) makes a hunk for each change. */
const MIDDLE = Array.from({ length: 10 }, (_, i) => `# ${i + 1}\n`).join("");
export const WORKSPACE_FILES = {
  "a.py": "x = 1\n",
  "b.py": `first = 1\n${MIDDLE}last = 1\n`,
  "c.py": "y = 1\n",
};
const B_PY_HUNK_1_ONLY = `first = 2\n${MIDDLE}last = 1\n`;
export const SECOND_PROMPT = "Set first and last to 2 in b.py, and y to 2 in c.py";
export const REJECT_REASON = "keep y at 1; the tests rely on it";

const oneLine = (text) => text.replace(/\s+/g, " ").trim();

/** Wait until `file` holds `expected`; the error shows what it holds instead. */
async function waitForFile(file, expected, timeoutMs = 30_000) {
  await waitFor(`${path.basename(file)} on disk to hold ${JSON.stringify(expected)}`,
    async () => (await readFile(file, "utf8")) === expected, { timeoutMs })
    .catch(async (error) => {
      throw new Error(`${error.message}; it holds ${JSON.stringify(await readFile(file, "utf8").catch(() => "(unreadable)"))}`);
    });
}

async function waitForStatus(card, expected, timeoutMs = 15_000) {
  const status = card.locator(".status");
  await waitFor(`the card's status "${expected}"`,
    async () => (await status.count()) > 0 && (await status.innerText()).trim().toLowerCase() === expected, { timeoutMs })
    .catch(async (error) => {
      const shown = await status.innerText().catch(() => "(no .status)");
      throw new Error(`${error.message}; it shows ${JSON.stringify(shown)}`);
    });
}

/** The nth edit card (0-based), once shown, with its suggestion id; it must name `file`. */
async function editCard(chat, nth, file, timeoutMs = 60_000) {
  const card = chat.locator(".edit-card").nth(nth);
  await card.waitFor({ state: "visible", timeout: timeoutMs });
  const suggestionId = await card.getAttribute("data-suggestion-id");
  if (!suggestionId) throw new Error(`edit card ${nth + 1} has no data-suggestion-id`);
  const text = oneLine(await card.innerText());
  if (!text.includes(file)) throw new Error(`edit card ${nth + 1} does not name ${file}: ${text.slice(0, 300)}`);
  return { card, suggestionId };
}

/** Send the second message, decide b.py's two hunks apart, reject c.py with a reason. */
export async function secondTurn({ page, chat, workspace, artifacts, step }) {
  await chat.locator("textarea#prompt").fill(SECOND_PROMPT);
  await chat.locator("button#send").click();
  step(`sent "${SECOND_PROMPT}"`);

  const partial = await partialDecision({ page, chat, workspace, artifacts, step });
  const rejected = await rejectWithReason({ page, chat, step });

  await waitFor("the second turn's end", async () => (await chat.locator(".msg.done").count()) >= 2, { timeoutMs: 60_000 });
  const done = oneLine(await chat.locator(".msg.done").nth(1).innerText());
  step(`second turn done: ${done}`);
  // The turn is over, so a write the server wrongly sent for the rejected edit has landed.
  const cPy = await readFile(path.join(workspace, "c.py"), "utf8");
  if (cPy !== WORKSPACE_FILES["c.py"]) throw new Error(`c.py changed although its edit was rejected: ${JSON.stringify(cPy)}`);
  return { partial, rejected, done };
}

async function partialDecision({ page, chat, workspace, artifacts, step }) {
  const { card, suggestionId } = await editCard(chat, 1, "b.py");
  const hunks = await card.locator("div.hunk").count();
  if (hunks !== 2) throw new Error(`the b.py card shows ${hunks} hunks, expected 2: ${oneLine(await card.innerText()).slice(0, 400)}`);
  step(`edit card for suggestion ${suggestionId} (b.py, 2 hunks)`);

  // The diff of b.py (the one of a.py was closed when it was accepted, but may still be leaving).
  const diffEditor = page.locator(".monaco-diff-editor", { has: page.locator(".editor.modified .view-lines", { hasText: "last = 2" }) });
  await diffEditor.first().waitFor({ state: "visible", timeout: 30_000 }).catch(async () => {
    const tabs = await page.locator(".tabs-container .tab").allInnerTexts().catch(() => []);
    throw new Error(`no diff editor shows b.py's proposal (tabs: ${JSON.stringify(tabs)})`);
  });
  // The proposal (modified) side carries its own CodeLens; click the one above hunk 1 there.
  const lenses = diffEditor.first().locator(".editor.modified .codelens-decoration");
  const acceptHunk1 = lenses.locator("a", { hasText: "Accept hunk 1" }).first();
  await acceptHunk1.waitFor({ state: "visible", timeout: 20_000 }).catch(async () => {
    throw new Error(`no "Accept hunk 1" CodeLens in b.py's diff (CodeLens shown: ${JSON.stringify(await lenses.allInnerTexts().catch(() => []))})`);
  });
  await acceptHunk1.click();
  step('clicked the CodeLens "Accept hunk 1"');
  await waitFor("the card to mark hunk 1 accepted",
    async () => (await card.locator('div.hunk[data-index="0"]').getAttribute("data-decision")) === "accepted", { timeoutMs: 15_000 });
  const hunk1Lens = lenses.filter({ hasText: "Hunk 1 accepted" }).first();
  await hunk1Lens.waitFor({ state: "visible", timeout: 15_000 }).catch(async () => {
    throw new Error(`the CodeLens does not say "Hunk 1 accepted" (shown: ${JSON.stringify(await lenses.allInnerTexts().catch(() => []))})`);
  });
  if (await card.locator(".status").count()) throw new Error("the card is decided after one of two hunks");
  // Half-way: the diff's CodeLens says "Hunk 1 accepted" and still offers hunk 2.
  await page.screenshot({ path: path.join(artifacts, "hunk-1-accepted.png") });

  await card.locator('div.hunk[data-index="1"] button.reject-hunk').click();
  step("clicked the card's ✗ on hunk 2");
  await waitForStatus(card, "partially accepted");
  const decisions = await card.locator("div.hunk").evaluateAll((blocks) => blocks.map((b) => b.dataset.decision));
  if (JSON.stringify(decisions) !== JSON.stringify(["accepted", "rejected"])) {
    throw new Error(`the card's hunks show ${JSON.stringify(decisions)}, expected ["accepted","rejected"]`);
  }
  await waitForFile(path.join(workspace, "b.py"), B_PY_HUNK_1_ONLY);
  step("b.py holds hunk 1's change only (first = 2, last = 1)");
  const screenshot = path.join(artifacts, "partial-decision.png");
  await card.scrollIntoViewIfNeeded();
  await page.screenshot({ path: screenshot });
  step(`screenshot ${screenshot}`);
  return { suggestion_id: suggestionId, screenshot };
}

async function rejectWithReason({ page, chat, step }) {
  const { card, suggestionId } = await editCard(chat, 2, "c.py");
  step(`edit card for suggestion ${suggestionId} (c.py)`);
  await card.locator("button.reject").click();
  const widget = page.locator(".quick-input-widget");
  await widget.waitFor({ state: "visible", timeout: 15_000 });
  const asked = oneLine(await widget.innerText());
  if (!asked.includes("c.py")) throw new Error(`the quick input after Reject edit is not about c.py: ${asked.slice(0, 300)}`);
  await widget.locator("input.input").fill(REJECT_REASON);
  await widget.locator("input.input").press("Enter");
  step(`rejected with the reason "${REJECT_REASON}"`);
  await waitForStatus(card, "rejected");
  const title = await card.locator(".status").getAttribute("title");
  if (title !== `Reason: ${REJECT_REASON}`) throw new Error(`the rejected card's status title is ${JSON.stringify(title)}`);
  return { suggestion_id: suggestionId, reason: REJECT_REASON };
}
