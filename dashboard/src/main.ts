// The admin dashboard: sign in once, then hash routes (#/overview, #/runs, #/runs/ID,
// #/adapters, #/tasks, #/rollouts/ID) render pages from the JSON admin API.
import "./style.css";
import { restoreSession, signOut, SignedOut } from "./api";
import { h } from "./dom";
import { renderAdapters } from "./pages/adapters";
import { renderLogin } from "./pages/login";
import { renderOverview } from "./pages/overview";
import { renderRun } from "./pages/run";
import { renderRollout } from "./pages/rollout";
import { renderRuns } from "./pages/runs";
import { renderTasks } from "./pages/tasks";

const app = document.getElementById("app") as HTMLElement;
const nav = document.getElementById("nav") as HTMLElement;
let cleanup: (() => void) | undefined;

async function route(): Promise<void> {
  cleanup?.();
  cleanup = undefined;
  const hash = location.hash || "#/overview";
  app.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  try {
    const run = /^#\/runs\/(\d+)$/.exec(hash);
    if (run) cleanup = await renderRun(app, Number(run[1]));
    else if (hash === "#/runs") await renderRuns(app);
    else if (hash === "#/adapters") await renderAdapters(app);
    else if (hash === "#/tasks") await renderTasks(app);
    else if (hash.startsWith("#/rollouts/")) await renderRollout(app, hash.slice("#/rollouts/".length));
    else await renderOverview(app);
  } catch (error) {
    if (error instanceof SignedOut) return showLogin();
    app.replaceChildren(h("p", { class: "error", role: "alert" }, String(error)));
  }
}

function showLogin(): void {
  nav.hidden = true;
  renderLogin(app, () => {
    nav.hidden = false;
    void route();
  });
}

document.getElementById("sign-out")?.addEventListener("click", async () => {
  await signOut().catch(() => undefined);
  showLogin();
});
window.addEventListener("hashchange", () => void route());

void (async () => {
  if (await restoreSession()) {
    nav.hidden = false;
    await route();
  } else {
    showLogin();
  }
})();
