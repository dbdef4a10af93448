// Builds the extension with esbuild.
//   node esbuild.mjs            src/extension.ts -> dist/extension.js (cjs, node20, sourcemap)
//   node esbuild.mjs --tests    also test/{unit,integration}/**/*.test.ts -> out/test/... (.js)
//   node esbuild.mjs --watch    rebuild on change (with --tests: the tests too)
//   node esbuild.mjs --tests --no-extension   only the tests (the core needs no `vscode`)
// Every build first regenerates generated/protocol.ts from docs/protocol.schema.json
// (scripts/generateProtocol.mjs). Type checking is separate: `npm run typecheck` (tsc --noEmit).

import * as esbuild from "esbuild";
import { existsSync, readdirSync, rmSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { generateProtocol } from "./scripts/generateProtocol.mjs";

const args = new Set(process.argv.slice(2));
const known = new Set(["--tests", "--watch", "--no-extension", "--production"]);
for (const a of args) {
  if (!known.has(a)) {
    console.error(`esbuild.mjs: unknown option ${a}; known: ${[...known].join(", ")}`);
    process.exit(2);
  }
}
const root = new URL(".", import.meta.url).pathname;

function testFiles(dir) {
  const abs = join(root, dir);
  if (!existsSync(abs)) return [];
  const out = [];
  for (const name of readdirSync(abs)) {
    const path = join(abs, name);
    if (statSync(path).isDirectory()) out.push(...testFiles(relative(root, path)));
    else if (name.endsWith(".test.ts")) out.push(relative(root, path));
  }
  return out;
}

const common = {
  bundle: true,
  platform: "node",
  target: "node20",
  format: "cjs",
  sourcemap: true,
  logLevel: "info",
};

const builds = [];
if (!args.has("--no-extension")) {
  builds.push({
    ...common,
    entryPoints: ["src/extension.ts"],
    outfile: "dist/extension.js",
    external: ["vscode"],
    minify: args.has("--production"),
  });
}
if (args.has("--tests")) {
  const entries = [...testFiles("test/unit"), ...testFiles("test/integration")];
  rmSync(join(root, "out/test"), { recursive: true, force: true }); // no stale tests run
  builds.push({
    ...common,
    entryPoints: entries,
    outdir: "out/test",
    outbase: "test",
    // Tests may not reach the VS Code API: a `vscode` import fails the build here.
    // typescript (the import-cycle test reads the import graph with it) is loaded, not bundled.
    external: ["ws", "typescript"],
  });
}

try {
  await generateProtocol();
} catch (err) {
  console.error(`esbuild.mjs: cannot generate the protocol types: ${err.message}`);
  process.exit(1);
}

if (args.has("--watch")) {
  for (const options of builds) await (await esbuild.context(options)).watch();
  console.log("esbuild.mjs: watching for changes (Ctrl+C to stop)");
} else {
  try {
    await Promise.all(builds.map((options) => esbuild.build(options)));
  } catch {
    process.exit(1); // esbuild already printed the errors
  }
}
