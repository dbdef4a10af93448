// The dashboard end to end in headless Chromium (playwright-core), against a running agent
// server: tests/dashboard/test_dashboard_e2e.py starts the server, a real learner worker and
// the runs, then this script. It prints one JSON object of what it saw on its last line and
// saves a screenshot of each page in $APPRENTICE_E2E_ARTIFACTS.
//
// Env: APPRENTICE_E2E_URL (the server), APPRENTICE_E2E_ADMIN_TOKEN, APPRENTICE_E2E_USER_TOKEN,
// APPRENTICE_E2E_LIVE_RUN (a run that is queued or running now), APPRENTICE_E2E_ROLLBACK_TO
// (a published version to roll back to; the base model when it serves already),
// APPRENTICE_E2E_TASK_RUN (a task run with a stored trajectory), APPRENTICE_E2E_ARTIFACTS, APPRENTICE_CHROMIUM.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

const env = process.env;
const base = env.APPRENTICE_E2E_URL;
const out = env.APPRENTICE_E2E_ARTIFACTS;
const seen = { errors: [] };
mkdirSync(out, { recursive: true });

const browser = await chromium.launch({
  executablePath: env.APPRENTICE_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage"],
  timeout: 60_000,
});
const shot = (page, name) => page.screenshot({ path: join(out, `${name}.png`), fullPage: true });

try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(30_000);
  page.on("pageerror", (error) => seen.errors.push(error.message));
  const dataRequests = [];
  page.on("response", (r) => {
    if (r.url().includes("/v1/admin/") && !r.url().endsWith("/v1/admin/session")) {
      dataRequests.push({ url: r.url(), status: r.status() });
    }
  });

  // Signed out: the login page, and no data; a wrong token and the user token are refused.
  await page.goto(`${base}/admin/`);
  await page.locator("#login").waitFor();
  seen.signedOutData = dataRequests.filter((r) => r.status === 200).length;
  for (const token of ["not-the-admin-token-0123456789", env.APPRENTICE_E2E_USER_TOKEN]) {
    await page.fill("#token", token);
    await page.click("#login button[type=submit]");
    await page.locator("#login-error:not(:empty)").waitFor();
  }
  seen.refusedMessage = await page.textContent("#login-error");
  seen.navHiddenWhenSignedOut = await page.locator("#nav").isHidden();
  await shot(page, "login");

  await page.fill("#token", env.APPRENTICE_E2E_ADMIN_TOKEN);
  await page.click("#login button[type=submit]");
  await page.locator("#counts").waitFor();

  // A run in progress updates without reloading.
  await page.goto(`${base}/admin/#/runs/${env.APPRENTICE_E2E_LIVE_RUN}`);
  await page.locator("#run-status").waitFor();
  const statuses = [await page.textContent("#run-status")];
  console.log("live-page-open"); // the test starts the worker that runs it now
  const navigations = [];
  page.on("framenavigated", (frame) => navigations.push(frame.url()));
  const deadline = Date.now() + 300_000;
  while (!["succeeded", "failed", "skipped", "deferred"].includes(statuses.at(-1)) && Date.now() < deadline) {
    await page.waitForTimeout(250);
    const now = await page.textContent("#run-status").catch(() => null);
    if (now && now !== statuses.at(-1)) statuses.push(now);
  }
  seen.liveStatuses = statuses;
  seen.liveReloads = navigations.length;
  await page.locator("#run canvas").first().waitFor();
  seen.runCurves = await page.locator("#run canvas").count();
  seen.runSteps = await page.locator("#steps tbody tr").count();
  seen.gate = await page.textContent("#gate").catch(() => null);
  seen.gateEvidence = await page.textContent("#gate-evidence").catch(() => null);
  await shot(page, "run");

  // The overview: completions shown and accepted per adapter with their intervals, the
  // charts (one series per adapter on an axis spanning the range; an empty one says so),
  // counts per adapter and kind; then the same for the last 24 hours.
  const charts = () => page.evaluate(() => Object.fromEntries([...document.querySelectorAll(".chart")]
    .map((box) => {
      const canvas = box.querySelector("canvas");
      if (canvas) return [canvas.id, { ...canvas.dataset }];
      const note = box.querySelector(".no-data");
      return [note?.id ?? "?", { empty: note?.textContent ?? "" }];
    })));
  await page.goto(`${base}/admin/#/overview`);
  await page.locator("#counts").waitFor();
  await page.waitForTimeout(300); // the chart draws in the next frame
  seen.overviewRows = await page.locator("#counts tbody tr td:first-child").allTextContents();
  seen.overviewCharts = await page.locator("canvas").count();
  seen.completionRates = await page.locator("#completion-rates tbody tr")
    .evaluateAll((rows) => rows.map((row) => [...row.cells].map((cell) => cell.textContent)));
  seen.rangeText = await page.textContent("#range-text");
  seen.charts = await charts();
  await shot(page, "overview");
  await page.selectOption("#range", "0");
  await page.locator("#range-text", { hasText: /^24 hours/ }).waitFor();
  await page.waitForTimeout(300);
  seen.dayCharts = await charts();
  await shot(page, "overview-day");

  await page.goto(`${base}/admin/#/runs`);
  await page.locator("#runs").waitFor();
  seen.runRows = await page.locator("#runs tbody tr").count();
  await shot(page, "runs");

  // Tasks: held-out solve rates per cycle and adapter; a cycle's trajectory, step by step.
  await page.goto(`${base}/admin/#/tasks`);
  await page.locator("#task-runs").waitFor();
  seen.taskRows = await page.locator("#task-runs tbody tr").count();
  await shot(page, "tasks");
  await page.goto(`${base}/admin/#/runs/${env.APPRENTICE_E2E_TASK_RUN}`);
  await page.locator("#rollouts a").first().click();
  await page.locator("#events li").first().waitFor();
  seen.trajectoryEvents = await page.locator("#events li").count();
  seen.trajectoryTerms = await page.locator("#reward-terms tbody tr").count();
  await shot(page, "trajectory");

  // Roll back from the adapters page, behind a confirm.
  await page.goto(`${base}/admin/#/adapters`);
  await page.locator("#adapters").waitFor();
  seen.deploymentsBefore = await page.locator("#deployments tbody tr").count();
  page.once("dialog", (dialog) => dialog.accept());
  // The target's button, when it has one (it is not serving already); else the base model.
  const button = page.locator(`#adapters button[data-version="${env.APPRENTICE_E2E_ROLLBACK_TO}"]`);
  seen.rolledBackTo = (await button.count()) ? env.APPRENTICE_E2E_ROLLBACK_TO : "base";
  await (seen.rolledBackTo === "base" ? page.locator("#rollback-base") : button).click();
  await page.locator("#action-message.ok, #action-message.error").waitFor({ timeout: 120_000 });
  seen.actionMessage = await page.textContent("#action-message");
  seen.actionOk = await page.locator("#action-message.ok").count() === 1;
  // A new row (locators, not waitForFunction: the page's CSP forbids the eval it needs).
  await page.locator("#deployments tbody tr").nth(seen.deploymentsBefore).waitFor();
  seen.deploymentsAfter = await page.locator("#deployments tbody tr").count();
  seen.servingRow = await page.locator("#adapters tr:has(.serving) td:first-child").textContent()
    .catch(() => "base");
  await shot(page, "adapters");
} catch (error) {
  seen.failure = String(error?.stack ?? error);
} finally {
  await browser.close();
  console.log(JSON.stringify(seen));
}
