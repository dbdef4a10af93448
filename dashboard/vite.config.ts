// Builds dist/ for the agent server to serve at /admin/ (agent_server/api/dashboard.py).
import { defineConfig } from "vite";

export default defineConfig({
  base: "/admin/",
  build: { outDir: "dist", emptyOutDir: true, sourcemap: false, chunkSizeWarningLimit: 400 },
});
