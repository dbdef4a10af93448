// First paint of dashboard pages in headless Chromium, for bench/dashboard.py: signs in once,
// then loads each page `repeats` times from a blank tab and reports the milliseconds from
// navigation start until the page's content is drawn (its table and charts in the DOM).
// Env: APPRENTICE_E2E_URL, APPRENTICE_E2E_ADMIN_TOKEN, APPRENTICE_PAINT_REPEATS,
// APPRENTICE_CHROMIUM. Prints one JSON object: {page: [ms, ...]}.
import { chromium } from "playwright-core";

const env = process.env;
const base = env.APPRENTICE_E2E_URL;
const repeats = Number(env.APPRENTICE_PAINT_REPEATS || 5);
const PAGES = { overview: "#counts", runs: "#runs, #no-runs", adapters: "#deployments" };

const browser = await chromium.launch({
  executablePath: env.APPRENTICE_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage"],
});
const times = {};
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(`${base}/admin/`);
  await page.fill("#token", env.APPRENTICE_E2E_ADMIN_TOKEN);
  await page.click("#login button[type=submit]");
  await page.locator("#counts").waitFor({ timeout: 60_000 });
  for (const [name, marker] of Object.entries(PAGES)) {
    times[name] = [];
    for (let i = 0; i < repeats + 1; i++) { // the first load warms caches: not counted
      await page.goto("about:blank");
      await page.goto(`${base}/admin/#/${name}`);
      await page.locator(marker).waitFor({ timeout: 60_000 });
      // The next animation frame: charts are drawn by then.
      const ms = await page.evaluate(() => new Promise((done) =>
        requestAnimationFrame(() => done(performance.now()))));
      if (i > 0) times[name].push(Math.round(ms));
    }
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(times));
