// The server URL's pure parts, apart from the `vscode` layer so they are unit-tested: whether
// a URL is a loopback one (only then may the extension start a local server), the health URL
// of a WebSocket URL, and the `apprentice serve` arguments that listen where the URL points.

/** True for ws://localhost, ws://127.x.x.x and ws://[::1]: a server this machine may start. */
export function isLoopbackUrl(url: string): boolean {
  try {
    const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
    return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
  } catch {
    return false;
  }
}

/** http(s)://host:port/healthz for a ws(s):// server URL. */
export function healthUrl(wsUrl: string): string {
  const url = new URL(wsUrl);
  url.protocol = url.protocol === "wss:" ? "https:" : "http:";
  url.pathname = "/healthz";
  url.search = "";
  url.hash = "";
  return url.toString();
}

/** `serve --host H --port P` for a server at `wsUrl` (the default port of ws/wss when none). */
export function serveArgs(wsUrl: string): string[] {
  const url = new URL(wsUrl);
  const port = url.port || (url.protocol === "wss:" ? "443" : "80");
  const host = url.hostname.replace(/^\[|\]$/g, "");
  return ["serve", "--host", host, "--port", port];
}
