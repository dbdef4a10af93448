// Errors of the connection and the session, shared by the core and the VS Code layer: each
// carries a machine-readable kind or code and a message meant to be shown to the person.

export type ConnectionFailureKind = "unauthorized" | "unreachable" | "timeout" | "protocol" | "closed";

/** Connecting (or staying connected) failed; `kind` says why, `message` what to do. */
export class ConnectionFailed extends Error {
  constructor(
    readonly kind: ConnectionFailureKind,
    message: string,
  ) {
    super(message);
    this.name = "ConnectionFailed";
  }
}

/** The server answered a request with an `error` message. */
export class ServerError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly sessionId?: string | null,
  ) {
    super(message);
    this.name = "ServerError";
  }
}

/** A request got no matching reply in time. */
export class RequestTimeout extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RequestTimeout";
  }
}
