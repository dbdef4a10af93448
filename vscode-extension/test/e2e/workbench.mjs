// Driving the VS Code workbench (served by code-server) from headless Chromium via
// playwright-core: launch Debian's chromium, wait for the workbench, run a command from the
// palette, find a webview's inner frame, read the status bar.
import { waitFor } from "./processes.mjs";

// Flags from the field notes: Debian's chromium as root, in a container, with no network.
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage",
];

export async function launchBrowser(executablePath) {
  let playwright;
  try {
    playwright = await import("playwright-core");
  } catch (error) {
    throw new Error(`playwright-core is not installed (${error.message}): run scripts/extension.sh ` +
      "(npm ci in vscode-extension installs it)");
  }
  const chromium = playwright.chromium ?? playwright.default?.chromium;
  return chromium.launch({ executablePath, headless: true, args: CHROMIUM_ARGS, timeout: 60_000 });
}

/** Open the workbench on `folder` and wait until it has drawn its status bar. */
export async function openWorkbench(page, baseUrl, folder) {
  await page.goto(`${baseUrl}/?folder=${encodeURIComponent(folder)}`, { waitUntil: "domcontentloaded", timeout: 60_000 });
  await page.locator(".monaco-workbench").waitFor({ state: "visible", timeout: 90_000 });
  await page.locator("#workbench\\.parts\\.statusbar").waitFor({ state: "visible", timeout: 60_000 });
}

/**
 * Run a command by its palette label ("Apprentice: Open Chat"). F1 opens the palette; if the
 * keypress was lost (focus not yet in the page), Ctrl+Shift+P is tried. The palette lists the
 * commands known when it opened, and an extension's commands appear only once the extension
 * host has read its manifest, so an open palette without the command is closed and reopened.
 */
export async function runPaletteCommand(page, label, timeoutMs = 60_000) {
  const widget = page.locator(".quick-input-widget");
  const row = widget.locator(".monaco-list-row", { hasText: label }).first();
  let shown = [];
  await waitFor(`the command palette to list "${label}"`, async () => {
    if (await widget.isVisible()) await page.keyboard.press("Escape");
    for (const key of ["F1", "Control+Shift+P"]) {
      await page.keyboard.press(key);
      if (await widget.waitFor({ state: "visible", timeout: 3000 }).then(() => true, () => false)) break;
    }
    await widget.locator("input.input").fill(`>${label}`);
    if (await row.waitFor({ state: "visible", timeout: 3000 }).then(() => true, () => false)) return true;
    shown = await widget.locator(".monaco-list-row").allInnerTexts().catch(() => []);
    return false;
  }, { timeoutMs, intervalMs: 1000 }).catch((error) => {
    throw new Error(`${error.message}; it shows ${JSON.stringify(shown.slice(0, 10))}: ` +
      "is the extension installed and its command contributed?");
  });
  await row.click();
}

/**
 * The frame that holds `selector`. code-server nests each webview in two iframes (the host
 * frame and its "active-frame"), so search every frame of the page, tolerating frames that are
 * detached while we look.
 */
export async function findFrameWith(page, selector, timeoutMs) {
  return waitFor(`a frame containing ${selector}`, async () => {
    for (const frame of page.frames()) {
      try {
        if (await frame.$(selector)) return frame;
      } catch {
        // Detached or navigating frame: look again on the next round.
      }
    }
    return undefined;
  }, { timeoutMs, intervalMs: 500 });
}

/** Texts of the status bar items that mention `word`. */
export async function statusBarTexts(page, word) {
  const items = page.locator("#workbench\\.parts\\.statusbar .statusbar-item", { hasText: word });
  return (await items.allInnerTexts()).map((text) => text.replace(/\s+/g, " ").trim());
}
