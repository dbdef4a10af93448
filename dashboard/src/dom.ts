// Building DOM without innerHTML: every text from the server lands as text, never as markup.

type Child = Node | string | number | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | boolean | ((event: Event) => void)> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (typeof value === "function") element.addEventListener(name.replace(/^on/, ""), value);
    else if (value === true) element.setAttribute(name, "");
    else if (value !== false) element.setAttribute(name, value);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

export function table(headers: string[], rows: Child[][], id?: string): HTMLTableElement {
  return h(
    "table",
    id ? { id } : {},
    h("thead", {}, h("tr", {}, ...headers.map((name) => h("th", {}, name)))),
    h("tbody", {}, ...rows.map((cells) => h("tr", {}, ...cells.map((cell) => h("td", {}, cell))))),
  );
}

export function when(iso: string | null): string {
  return iso ? new Date(iso).toISOString().replace("T", " ").slice(0, 19) + "Z" : "—";
}

export function seconds(value: number | null | undefined): string {
  if (value === null || value === undefined) return "—";
  return value >= 100 ? `${Math.round(value)} s` : `${value.toFixed(1)} s`;
}

export function percent(part: number, whole: number): string {
  return whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : "—";
}

export { adapterName } from "./timeline"; // base for version null or 0, else policy-vN
