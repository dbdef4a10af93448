// The dashboard's only way to the server: the documented JSON admin API (/v1/admin/...),
// signed in by the HttpOnly session cookie; state changes carry the session's CSRF token.

export class SignedOut extends Error {}

export class ApiError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

let csrf = "";

export async function api<T>(path: string, init: RequestInit = {}): Promise<T> {
  const headers = new Headers(init.headers);
  const method = (init.method ?? "GET").toUpperCase();
  if (method !== "GET") {
    headers.set("X-CSRF-Token", csrf);
    headers.set("Content-Type", "application/json");
  }
  const response = await fetch(path, { ...init, method, headers, credentials: "same-origin" });
  if (response.status === 401) throw new SignedOut("not signed in");
  if (!response.ok) {
    let detail = response.statusText;
    try {
      const body = await response.json();
      detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
    } catch {
      /* not JSON: keep the status text */
    }
    throw new ApiError(response.status, detail);
  }
  return (response.status === 204 ? undefined : await response.json()) as T;
}

interface SessionOut {
  csrf_token: string;
  expires: string;
}

export async function signIn(token: string): Promise<void> {
  const body = await api<SessionOut>("/v1/admin/session", {
    method: "POST",
    body: JSON.stringify({ token }),
  });
  csrf = body.csrf_token;
}

/** True when the cookie still signs us in (and the CSRF token is known again). */
export async function restoreSession(): Promise<boolean> {
  try {
    csrf = (await api<SessionOut>("/v1/admin/session")).csrf_token;
    return true;
  } catch (error) {
    if (error instanceof SignedOut || error instanceof ApiError) return false;
    throw error;
  }
}

export async function signOut(): Promise<void> {
  await api<void>("/v1/admin/session", { method: "DELETE" });
  csrf = "";
}

// ---- the records (shapes as in the OpenAPI schema at /openapi.json) -----------------------

export interface StepTime {
  name: string;
  status: string;
  seconds: number | null;
}

export interface Run {
  id: number;
  status: string;
  trigger: string;
  kind: string;
  adapter_version: number | null;
  error: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  dataset: Record<string, unknown> | null;
  step_times: StepTime[];
}

export interface Step {
  name: string;
  status: string;
  started: string | null;
  finished: string | null;
  metrics: Record<string, unknown>;
}

export interface RunDetail extends Run {
  config: Record<string, unknown>;
  steps: Step[];
}

export interface Adapter {
  version: number;
  name: string;
  path: string;
  base_model: string;
  parent_version: number | null;
  status: string;
  metrics: Record<string, unknown>;
  run_id: number | null;
  created_at: string;
}

export interface Deployment {
  id: number;
  adapter_version: number | null;
  backend: string;
  status: string;
  rollback_of: number | null;
  reason: string | null;
  created_at: string;
}

export interface OutcomeCount {
  t: string;
  adapter_version: number | null;
  suggestion: string;
  kind: string;
  n: number;
}

export interface OutcomeSeries {
  since: string;
  until: string;
  bucket_s: number;
  language: string | null;
  languages: string[];
  user: string | null;
  users: string[];
  rows: OutcomeCount[];
}

/** k of n with its 95 % Wilson score interval (computed by the server); null when n is 0. */
export interface Rate {
  k: number;
  n: number;
  value: number | null;
  low: number | null;
  high: number | null;
}

export interface AdapterCompletions {
  adapter_version: number | null;
  requests: number;
  shown: number;
  accepted: number;
  shown_share: Rate;
  acceptance: Rate;
}

export interface CompletionBucket {
  t: string;
  adapter_version: number | null;
  requests: number;
  shown: number;
  accepted: number;
}

export interface CompletionStats {
  since: string;
  until: string;
  bucket_s: number;
  language: string | null;
  user: string | null;
  adapters: AdapterCompletions[];
  buckets: CompletionBucket[];
}

export interface SolveRates {
  run_id: number;
  created_at: string;
  status: string;
  serving_version: number | null;
  serving: number | null;
  candidate: number | null;
  accepted: boolean | null;
  adapter_version: number | null;
  evaluated: number;
}

export interface Rollout {
  id: string;
  run_id: number | null;
  session_id: string | null;
  instance_id: string;
  kind: string;
  difficulty: string;
  adapter: string | null;
  status: string;
  message: string | null;
  reward: number;
  reward_terms: Record<string, unknown>;
  truncated: boolean;
  steps: number;
  tokens: number;
  summaries: number;
  wall_s: number;
  created_at: string;
}

export interface RolloutDetail extends Rollout {
  diff: string;
  calls: { seq: number; kind: string; completion_tokens: number; adapter: string | null;
           finish_reason: string | null }[];
  events: { seq: number; kind: string; role: string | null; payload: Record<string, unknown> }[];
}
