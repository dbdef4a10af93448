// No import cycles among the extension's modules (src/ and the generated protocol types): a
// cycle makes module load order matter and lets layers leak into each other. Every static
// import counts, `import type` and `export ... from` included, as in the Python check of the repository
//. The graph is read with TypeScript's own import scanner.

import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import ts from "typescript";
import { packageRoot } from "./helpers";

const ROOT = packageRoot();

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith(".ts") && !name.endsWith(".d.ts") ? [path] : [];
  });
}

/** The module a relative specifier names, if it is one of ours (a .ts file or a folder's index). */
function resolveLocal(from: string, specifier: string): string | undefined {
  if (!specifier.startsWith(".")) return undefined; // a package or node: builtin
  const base = resolve(dirname(from), specifier);
  return [`${base}.ts`, join(base, "index.ts")].find(existsSync);
}

/** Module -> the modules it imports (paths relative to the package root). */
export function importGraph(files: string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const info = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    const targets = info.importedFiles
      .map((f) => resolveLocal(file, f.fileName))
      .filter((t): t is string => t !== undefined)
      .map((t) => relative(ROOT, t));
    graph.set(relative(ROOT, file), [...new Set(targets)]);
  }
  return graph;
}

/** Every cycle found by a depth-first search, each as the path that closes it. */
export function findCycles(graph: Map<string, string[]>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (node: string): void => {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") cycles.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(node, "done");
  };
  for (const node of [...graph.keys()].sort()) if (!state.has(node)) visit(node);
  return cycles;
}

test("the cycle finder finds a cycle through a type-only import", () => {
  const graph = new Map([
    ["a.ts", ["b.ts"]],
    ["b.ts", ["c.ts"]],
    ["c.ts", ["a.ts"]],
    ["d.ts", ["a.ts"]],
  ]);
  assert.deepEqual(findCycles(graph), [["a.ts", "b.ts", "c.ts", "a.ts"]]);
  const scanned = ts.preProcessFile('import type { X } from "./x";\nexport { Y } from "./y";\n', true, true);
  assert.deepEqual(scanned.importedFiles.map((f) => f.fileName), ["./x", "./y"]);
});

test("no import cycles among the extension's modules", (t) => {
  const files = [...sourceFiles(join(ROOT, "src")), ...sourceFiles(join(ROOT, "generated"))];
  assert.ok(files.length > 30, `only ${files.length} modules found under ${ROOT}/src`);
  const graph = importGraph(files);
  const cycles = findCycles(graph);
  const edges = [...graph.values()].reduce((n, targets) => n + targets.length, 0);
  assert.deepEqual(
    cycles.map((c) => c.join(" -> ")),
    [],
    `import cycles among ${graph.size} modules (break each, e.g. by moving the shared part to its own module)`,
  );
  t.diagnostic(`import graph: ${graph.size} modules, ${edges} imports, no cycles`);
});
