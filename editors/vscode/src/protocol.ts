/**
 * The ds4-lsp wire contract in TypeScript: params and results of `ds4/plan`, `ds4/retrieve`,
 * `ds4/manifest`, `ds4/compact` (and the server-to-client `ds4/summarize`), `ds4/usage`, pins and
 * memory (`ds4/pin`, `ds4/unpin`, `ds4/remember`, `ds4/forget`, `ds4/memory`),
 * `ds4/artifactSearch`, owned sessions (`ds4/sessionOpen`, `ds4/sessionAppend`), the
 * `ds4.rebuildIndex`, `ds4.health`, `ds4.summaries` and `ds4.privacy` commands, and `initializationOptions`. Field names and meanings follow docs/protocol.md; every key is
 * camelCase. Token counts are `chars-v1` estimates (integers), durations are milliseconds,
 * timestamps are ISO-8601 UTC strings.
 *
 * The `check*` functions are runtime guards for the server's answers: each returns the paths
 * of the fields that do not have the documented type (empty when the value fits), and the
 * matching `is*` function is the boolean form. They check the fields this extension reads
 * and leave the rest alone, so a newer server that adds fields still passes.
 *
 * Pure module: no `vscode` import, usable in plain node (tests) and by other extensions.
 */

export const DS4_PLAN = 'ds4/plan';
export const DS4_RETRIEVE = 'ds4/retrieve';
export const DS4_MANIFEST = 'ds4/manifest';
/** Server command ids (`workspace/executeCommand`). */
export const REBUILD_INDEX = 'ds4.rebuildIndex';
export const HEALTH = 'ds4.health';
/** Notification, client to server: an agent tool ran (project knowledge re-syncs). */
export const DS4_TOOL_EXECUTED = 'ds4/toolExecuted';
/** Notification, server to client: a project sync ran. */
export const DS4_INDEX_UPDATED = 'ds4/indexUpdated';
/** Request, client to server: summarize the older part of a session (docs/compaction.md). */
export const DS4_COMPACT = 'ds4/compact';
/** Request, server to client: write a summary (only to a client that declared it). */
export const DS4_SUMMARIZE = 'ds4/summarize';
/** Notification, client to server: the compaction entry was appended to the session. */
export const DS4_COMPACT_COMMITTED = 'ds4/compactCommitted';
/** Notification, client to server: the compaction entry was not appended. */
export const DS4_COMPACT_FAILED = 'ds4/compactFailed';
/** Server command: a session's summary graph. */
export const SUMMARIES = 'ds4.summaries';
/** Server command: what a destination model may see under the privacy policy. */
export const PRIVACY = 'ds4.privacy';
/** Notification, client to server: what a provider reported a planned call cost (docs/model-awareness.md). */
export const DS4_USAGE = 'ds4/usage';
/** Notification, client to server: the provider rejected a native continuation's `previous_response_id`. */
export const DS4_CONTINUATION_FAILED = 'ds4/continuationFailed';
/** Requests, client to server: pins and memory (docs/memory.md); each returns the custom entry that records the write. */
export const DS4_PIN = 'ds4/pin';
export const DS4_UNPIN = 'ds4/unpin';
export const DS4_REMEMBER = 'ds4/remember';
export const DS4_FORGET = 'ds4/forget';
/** Request: the current pins and memory items with their provenance (read-only). */
export const DS4_MEMORY = 'ds4/memory';
/** Request: literal search in stored tool-output artifacts (docs/artifacts.md). */
export const DS4_ARTIFACT_SEARCH = 'ds4/artifactSearch';
/** Requests: sessions the server owns and writes (for clients that do not write Pi sessions). */
export const DS4_SESSION_OPEN = 'ds4/sessionOpen';
export const DS4_SESSION_APPEND = 'ds4/sessionAppend';
/** JSON-RPC `RequestFailed`: a write the server refused (a conflict, an unknown or inactive id). */
export const REQUEST_FAILED = -32803;

/** A Pi message object exactly as in a session file (`role` plus role-specific fields). */
export type AgentMessage = { role: string } & Record<string, unknown>;

/** A Pi session file and optionally the entry whose branch is active. */
export interface SessionRef {
  /** Path of the session `.jsonl` file (absolute, or relative to the server's cwd). */
  file: string;
  /** Entry id of the active leaf; default: the last entry in file order. */
  leafId?: string;
}

// ----------------------------------------------------------------------------- ds4/plan

export interface PlanParams {
  session?: SessionRef;
  /** The messages the agent would send; default: built from `session`'s active branch. */
  messages?: AgentMessage[];
  /** Appended as a new user message. */
  request?: string;
  /** Missing parts come from the session, `modelAwareness.overrides` and the model table. */
  model?: {
    provider?: string;
    id?: string;
    /** Tokens. */
    contextWindow?: number;
    /** Tokens. */
    maxOutputTokens?: number;
    /** The provider API the client speaks, e.g. `openai-responses` (native continuation). */
    api?: string;
  };
  /**
   * Servers with native continuation: the provider request body without `input` and
   * `previous_response_id` (hashed by the server to notice changed options, never stored).
   */
  requestOptions?: Record<string, unknown>;
  /** Size of the system prompt and tool schemas, tokens. Default 0. */
  fixedTokens?: number;
  /** Overrides the `context.mode` setting. */
  mode?: 'managed' | 'observer';
}

/**
 * A plan's token budget: tokens, except `calibrationRatio` (the model's actual/estimated ratio
 * the limits were divided by; 1.0 uncalibrated) and, on servers with model awareness,
 * `autoTuned` (a boolean: `autoTune` raised the target).
 */
export interface Budget {
  contextWindow: number;
  outputReserve: number;
  safetyMargin: number;
  hardInputLimit: number;
  softLimit: number;
  targetInputTokens: number;
  recentTailTokens: number;
  maxRetrievedHistoryTokens: number;
  maxProjectTokens: number;
  maxSummaryTokens: number;
  calibrationRatio?: number;
  autoTuned?: boolean;
  [key: string]: number | boolean | undefined;
}

export interface PlanStats {
  counts: {
    messages: number;
    groups: number;
    supplements: number;
    included: number;
    excluded: number;
    output: number;
  };
  /** Tokens by item kind (`recent`, `history`, `current`, ...). */
  tokens: Record<string, number>;
  rescuedImmediatePredecessor: boolean;
  oversizedTurnExclusions: number;
  /** Observer mode: what a managed plan would send (tokens). */
  plannedTokens?: number | null;
  included: number;
  excluded: number;
  durationMs: number;
}

export interface PlanResult {
  /** `fallback`: planning failed or ds4 is disabled; `messages` are the input messages. */
  mode: 'managed' | 'observer' | 'fallback';
  messages: AgentMessage[];
  manifestId: string;
  /** False when the manifest is only kept in memory (the latest 64 can still be fetched). */
  manifestStored: boolean;
  /** `fixedTokens` plus the estimate of `messages`. */
  estimatedTokens: number;
  budget: Budget;
  model: {
    provider: string;
    id: string;
    contextWindow: number;
    maxOutputTokens: number | null;
    /** `request`, `override`, `table:<key>` or `default`. */
    source: string;
  };
  warnings: string[];
  stats: PlanStats;
  /** Present in mode `fallback`. */
  fallbackReason?: string;
  /** Present when planned from a session. */
  session?: { id: string; file: string; leafId: string | null };
  /** Servers with privacy: what the destination may see and what was held back. */
  privacy?: PrivacySummary | null;
  /**
   * Servers with native continuation: whether to send only the new items after the
   * provider's previous response (`delta`) or the whole request (`full`); `null` when the
   * request is not eligible (`reason` of a `full` decision says why).
   */
  continuation?: Continuation | null;
}

/** The native continuation decision of a plan (docs/protocol.md, `ds4/plan`). */
export interface Continuation {
  /** `openai-previous-response-v1`. */
  strategy: string;
  mode: 'delta' | 'full';
  /** Index into the plan result's `messages` of the first item to send (0 for `full`). */
  deltaStart: number;
  /** Why `full` (e.g. `cold-start`, `state-expired`), or why not eligible; `null` for `delta`. */
  reason: string | null;
}

// ----------------------------------------------------------------------------- ds4/usage

/**
 * What a provider reported for one response, in Pi's `Usage` shape: tokens, integers >= 0.
 * Other keys of Pi's object (`totalTokens`, `cost`) may be passed along; the server ignores them.
 */
export interface UsageCounts {
  /** Input tokens not read from or written to the prompt cache. */
  input: number;
  output?: number;
  /** Input tokens read from the provider's prompt cache. */
  cacheRead?: number;
  /** Input tokens written to the provider's prompt cache. */
  cacheWrite?: number;
  [key: string]: unknown;
}

/** `ds4/usage` params: sent after each provider response to a planned request. */
export interface UsageParams {
  /** The plan's `manifestId`. */
  manifestId: string;
  /** Who answered: provider and model id (a different one than planned is a model switch). */
  provider: string;
  model: string;
  usage: UsageCounts;
  /** Pi's stop reason: `stop`, `length`, `toolUse`, `error`, `aborted`, ... */
  stopReason?: string;
  /** Native continuation: the response's output as Pi messages ... */
  outputItems?: Record<string, unknown>[];
  /** ... or their hashes (the continuation item hash rule). */
  outputItemHashes?: string[];
  /** Native continuation: false when the provider gave no response id. */
  hasResponseId?: boolean;
}

/**
 * `ds4/continuationFailed` params: the provider rejected the `previous_response_id` of a
 * `delta` call (a stale handle); the server drops the session's continuation state, so the
 * next plan is `full` (reason `continuation-handle-rejected`).
 */
export interface ContinuationFailedParams {
  /** The session file of the plan (as in `ds4/plan`). */
  session: { file: string };
  /** The model whose state to drop; absent: every model of the session. */
  provider?: string;
  model?: string;
  /** The provider's error code or error object, any JSON (never read, stored or logged by the server). */
  reason?: unknown;
}

// ----------------------------------------------------------------------------- privacy

/**
 * The privacy levels, lowest first (docs/privacy.md): a destination allowed a level sees the
 * text of that level; `local-only` text goes to local providers only.
 */
export const PRIVACY_LEVELS = ['normal', 'internal', 'sensitive', 'local-only'] as const;
export type PrivacyLevel = (typeof PRIVACY_LEVELS)[number];

/** Where the planned text goes, as the privacy policy sees it. */
export interface PrivacyDestination {
  /** The model's provider; `null` when unknown (treated as remote). */
  provider: string | null;
  /**
   * The destination's class: `local` (a provider of `privacy.localProviders`, sees every
   * level) or `remote`. Named `kind` on the wire (`class` is a keyword in some clients).
   */
  kind: 'local' | 'remote';
  /** The levels it may see. */
  allowed: string[];
  /** Whether secrets (keys, tokens, passwords) are redacted before the text is sent. */
  redactSecrets: boolean;
}

/**
 * The privacy part of a plan, a `ds4/retrieve` result and a manifest: counts only, never text.
 * The server always sends every field; all but `enabled` are optional here because the guard
 * checks only `enabled` (a plan is never refused over a counter), so readers default them.
 */
export interface PrivacySummary {
  enabled: boolean;
  /** `null` when no destination was named (`ds4/retrieve` without `model`). */
  destination?: PrivacyDestination | null;
  /** Texts classified above `normal`, by level. */
  classified?: Record<string, number>;
  /** Secrets redacted, in all, and by kind (`OpenAI key`, `bearer token`, ...). */
  redacted?: number;
  redactedByKind?: Record<string, number>;
  /** Segments of native turns replaced by `[DS4 <level> content excluded by privacy policy]`, by level. */
  withheld?: Record<string, number>;
  /** Supplements (history evidence, snippets, summaries) dropped whole, by level. */
  excluded?: Record<string, number>;
}

/** The reason of a manifest item dropped for privacy (its `classification` is the level). */
export const PRIVACY_EXCLUSION_REASON = 'excluded due to privacy policy';

/** The argument of the `ds4.privacy` command. */
export interface PrivacyParams {
  /** The destination as `provider/model` (e.g. `openai/gpt-4o`) or a bare provider id. */
  model: string;
}

/** The `ds4.privacy` answer: what the destination may see. */
export interface PrivacyAnswer {
  /** `privacy.enabled`. */
  enabled: boolean;
  provider: string | null;
  /** The destination's class, `local` or `remote` (see `PrivacyDestination.kind`). */
  kind: 'local' | 'remote';
  /** Levels it may see, and levels held back from it. */
  allowed: string[];
  withheld: string[];
  redactSecrets: boolean;
  /** The policy's explanation, in sentences. */
  explanation: string;
  /** The setting that decided (e.g. `privacy.remoteDefaultAllowed`). */
  rule?: string;
  /** The active policy (the `privacy.*` settings, as in `ds4.health`). */
  policy?: Record<string, unknown>;
}

// ----------------------------------------------------------------------------- ds4/retrieve

/** Where `ds4/retrieve` looks: the session's history, the workspace's files, its Git history. */
export type RetrieveScope = 'history' | 'project' | 'git';
export const RETRIEVE_SCOPES: readonly RetrieveScope[] = ['history', 'project', 'git'];

export interface RetrieveParams {
  /** Default: the text of the last user message on the active branch. */
  query?: string;
  /** Needed by the `history` scope (else the status is `no-session`). */
  session?: SessionRef;
  /** Default `['history']`. */
  scopes?: RetrieveScope[];
  /** 1..100; default: the `retrieval.maxResults` setting. */
  maxResults?: number;
  /** Bound on the excerpts' total size (tokens, >= 1). */
  maxTokens?: number;
  /**
   * Servers with privacy: the destination of the hits. Named, the hits are sanitized for it
   * (withheld levels dropped, secrets redacted for a remote one); absent, they are only
   * classified.
   */
  model?: { provider?: string; id?: string };
}

export interface HistoryHit {
  /** `<sessionId>:<entryId>`. */
  entryKey: string;
  entryId: string;
  role: string | null;
  createdAt: string | null;
  /** Higher is better; comparable within one answer. */
  score: number;
  reason: string;
  /** The quoted transcript text. */
  excerpt: string;
  /** Size of `excerpt`, tokens. */
  tokens: number;
  /** Servers with privacy: the excerpt's level. */
  classification?: string;
}

export interface ProjectHit {
  /** The workspace folder's name and canonical root (several folders). */
  folder?: string;
  folderPath?: string;
  /** Relative to the workspace folder. */
  path: string;
  /** 1-based, inclusive. */
  startLine: number;
  endLine: number;
  fileHash: string;
  score: number;
  reason: string;
  text: string;
  snippetId?: string;
  /** Size of the quoted snippet, tokens. */
  tokens?: number;
  /** The file differs from Git HEAD in the working tree. */
  modified?: boolean;
  /** Servers with privacy: the snippet's level. */
  classification?: string;
}

/** A commit of the trusted workspace's Git history (scope `git`). */
export interface CommitHit {
  folder?: string;
  folderPath?: string;
  /** The full commit id. */
  hash: string;
  /** Committer date, ISO-8601 UTC (`2024-10-24T21:10:49Z`). */
  committedAt: string;
  /** The message's first paragraph on one line (`""` when withheld). */
  subject: string;
  /** Changed paths relative to the workspace folder, at most 20 (a merge lists none). */
  files: string[];
  /** How many files Git listed. */
  filesTotal: number;
  /** The git scope's relevance, 0..1.25. */
  score: number;
  /** The request's words the commit holds, and the named file it changed. */
  reason: string;
  /** Present when the message looked like it holds a secret and was not indexed: why. */
  withheld?: string;
  /** The block sent to a model: the message as quoted data between BEGIN/END markers. */
  quoted: string;
  /** Size of `quoted`, tokens. */
  tokens: number;
}

export type GitStatus = 'untrusted' | 'no-workspace' | 'disabled' | 'no-git' | 'no-index' | 'no-query' | 'error' | 'ok';

/** What one scope's search sent, what fell under the relevance floor, and why none was sent. */
export interface ScopeRelevance {
  /** The scope's search status (`ok`, `no-query`, ...). */
  status: string;
  /** Hits returned. */
  sent: number;
  /** Candidates listed as under the relevance floor (at most 16). */
  belowFloor: number;
  /** The floor and the best below-floor score, on the scope's own scale; `null` when none fell below. */
  floor: number | null;
  best: number | null;
  /** `null` when something was sent, else why not (e.g. `no candidate reached the relevance floor (best 0.210 < 0.350)`). */
  why: string | null;
}

/** Per scope searched. */
export type Relevance = Partial<Record<RetrieveScope, ScopeRelevance>>;

export interface RetrievalStats {
  candidates: number;
  duplicates: number;
  alternateBranchCandidates: number;
  alreadyInContext: number;
  latencyMs: number;
}

export interface RetrieveResult {
  status: 'ok' | 'no-query' | 'disabled' | 'no-session';
  query: string | null;
  history: HistoryHit[];
  project: ProjectHit[];
  /** `null` (or absent, older servers) without the `project` scope. */
  projectStatus?: string | null;
  stats: RetrievalStats;
  warnings: string[];
  /** Per scope searched (servers with the relevance floor). */
  relevance?: Relevance;
  /** Only with the `git` scope: the commits, best first. */
  git?: CommitHit[];
  /** Only with the `git` scope. */
  gitStatus?: GitStatus;
  /** Servers with privacy. */
  privacy?: PrivacySummary | null;
}

// ----------------------------------------------------------------------------- ds4/manifest

export type ManifestView = 'summary' | 'included' | 'excluded' | 'full';

/** Give `id`, or `session` with `latest: true`. */
export interface ManifestParams {
  id?: string;
  session?: SessionRef;
  latest?: boolean;
  /** Default `summary` (no item lists, `itemCounts` instead). */
  view?: ManifestView;
}

/** One planned item: metadata only, never message text. */
export interface ManifestItem {
  /** `recent`, `history`, `current`, `background`, ... */
  kind: string;
  sourceId: string;
  groupId: string | null;
  classification: string | null;
  tokens: number;
  score: number | null;
  reason: string;
  /**
   * A bulk item only (one `background` item in `excluded`, docs/protocol.md "bulk item"):
   * how many older messages it stands for (more than 1), from `sourceId` (the oldest) to
   * `lastSourceId` (the newest). Absent on every other item, which stands for one source.
   */
  count?: number;
  /** A bulk item only: the newest entry id of its range. */
  lastSourceId?: string;
}

export interface Manifest {
  id: string;
  sessionId: string | null;
  branchLeafId: string | null;
  createdAt: string;
  provider: string | null;
  model: string | null;
  modelSource: string | null;
  contextWindow: number;
  outputReserve: number;
  hardInputLimit: number;
  targetInputTokens: number;
  estimatedTokens: number;
  /** `null` until a provider reports usage. */
  actualTokens: number | null;
  fixedTokens: number;
  promptHash: string | null;
  policyVersion: string;
  plannerVersion: string;
  estimatorVersion: string;
  /** The full budget (`Budget`): tokens, plus `calibrationRatio` (a ratio) and `autoTuned`. */
  budgets: Budget;
  /** Present in views `included` and `full`. */
  included?: ManifestItem[];
  /** Present in views `excluded` and `full`. */
  excluded?: ManifestItem[];
  /** Present in view `summary`. */
  itemCounts?: { included: number; excluded: number };
  /** Present when a large excluded list was rolled up. */
  excludedRollup?: { total: number; omitted: number };
  summaryIds: string[];
  retrievedEventIds: string[];
  retrieved: { entryKey: string; score: number; reason: string }[];
  planning: {
    mode: string;
    fallbackReason: string | null;
    counts: Record<string, number>;
    tokens: Record<string, number>;
    rescuedImmediatePredecessor: boolean;
    oversizedTurnExclusions: number;
    plannedTokens: number | null;
  };
  retrieval: RetrievalStats | null;
  /**
   * Servers with the relevance floor: per scope searched. Candidates under the floor are
   * `excluded` items whose reason reads `below the relevance floor (score < floor)`.
   */
  relevance?: Relevance;
  warnings: string[];
  /** Servers with project knowledge: the project snippets the plan sent (metadata only). */
  projectSnippets?: ProjectSnippet[];
  /** Servers with project knowledge: the workspace revision at plan time (`null` without one). */
  projectRevision?: ProjectRevision | null;
  /** Servers with project knowledge: the project search of the plan. */
  project?: {
    status: string;
    dropped?: { path: string; reason: string }[];
    reindexed?: string[];
  };
  /**
   * Servers with privacy: the destination and what was classified, redacted, held back
   * (`null` when the plan recorded none).
   */
  privacy?: PrivacySummary | null;
  /** Servers with model awareness: what the provider reported (`null` until `ds4/usage`). */
  usage?: ManifestUsage | null;
  /** Servers with model awareness: the model's calibration and a model switch. */
  modelAwareness?: ModelAwareness | null;
  /** Servers with native continuation: the plan's decision (`null` when not eligible). */
  continuation?: Continuation | null;
}

/** The usage a provider reported for a manifest's call (tokens). */
export interface ManifestUsage {
  provider: string;
  model: string;
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  stopReason: string | null;
  /** `cacheRead / (input + cacheRead + cacheWrite)`, 4 decimals; `null` when that is 0. */
  cacheShare: number | null;
  /** ISO-8601 UTC. */
  reportedAt: string;
}

/** A calibration drift warning (docs/model-awareness.md). */
export interface CalibrationWarning {
  /** `persistent-underestimate`, `persistent-overestimate`, `calibration-outliers`, ... */
  code: string;
  severity: 'warning' | 'critical';
  message: string;
}

/** One provider/model's calibration: how far the estimate is from what the provider reports. */
export interface Calibration {
  provider: string;
  model: string;
  /** actual / estimated tokens applied to the limits (1.0 until calibrated). */
  ratio: number;
  calibrated: boolean;
  /** Usage samples in the window, those accepted, and those rejected as outliers. */
  samples: number;
  accepted: number;
  outliers: number;
  /** Accepted samples needed before the ratio applies, when the server says. */
  minimumSamples?: number;
  warnings: CalibrationWarning[];
}

/** The `modelAwareness` of a manifest. */
export interface ModelAwareness {
  /** e.g. `chars-v2`. */
  estimatorVersion: string;
  /**
   * `null`: not looked up (the plan's provider is unknown); a model with no reports yet comes
   * as a calibration with `samples: 0`; absent: a server before calibration.
   */
  calibration?: Calibration | null;
  /** The session's previous plan was for another model (`provider/model` each). */
  modelSwitch?: { from: string; to: string } | null;
}

/** A profile's calibration in `ds4.health`. */
export interface HealthCalibration extends Calibration {
  estimatorVersion: string;
  /** Cache reads over all input of the profile's reports; `null` before any. */
  cacheShare: number | null;
  /** ISO-8601 UTC of the latest report; `null` before any. */
  lastReportedAt: string | null;
}

/** A project snippet a plan sent: included items of kind `project` have it as `sourceId`. */
export interface ProjectSnippet {
  snippetId: string;
  path: string;
  fileHash: string;
  /** `[startLine, endLine]`, 1-based, inclusive. */
  lines: [number, number];
  score: number;
  reason: string;
  modified: boolean;
  gitCommit: string | null;
}

export interface ProjectRevision {
  branch: string | null;
  head: string | null;
  dirty: boolean | null;
  changedPaths?: string[];
  indexedAt?: string | null;
}

// ----------------------------------------------------------------------------- commands

export interface RebuildIndexResult {
  sessions: number;
  entries: number;
  failed: { sessionFile: string; error: string }[];
  durationMs: number;
  results: {
    sessionId: string;
    sessionFile: string;
    outcome: 'noop' | 'incremental' | 'rebuild' | 'skipped';
    reason: string;
    entriesAdded: number;
    entriesTotal: number;
    malformedLines: number;
    bytesRead: number;
    durationMs: number;
  }[];
}

export interface HealthResult {
  status: 'ok' | 'warning';
  version: string;
  schemaVersion: number;
  databasePath: string;
  sqliteVersion: string;
  fts5: boolean;
  sessions: number;
  entries: number;
  manifests: number;
  ephemeralManifests: number;
  estimator: string;
  notices: string[];
  configWarnings: string[];
  /** Servers with project knowledge: e.g. `<n> project snippet(s) sent to the model have changed since`. */
  warnings?: string[];
  /** Servers with project knowledge: the project index (as `ds4.projectStatus`). */
  project?: {
    status: 'untrusted' | 'no-workspace' | 'disabled' | 'indexing' | 'ready' | 'error';
    projectPath: string | null;
    trusted: boolean;
    /** Only when trusted. */
    files?: number;
    snippets?: number;
    /** Commits in the Git history index (trusted, with `project.maxCommits` > 0). */
    commits?: number;
    staleSnippets?: number;
  };
  server: {
    name: string;
    version: string;
    positionEncoding: string;
    trusted: boolean;
  };
  /** Servers with privacy: the active policy (the `privacy.*` settings). */
  privacy?: Record<string, unknown>;
  /** Servers with model awareness: each provider/model profile's calibration and cache share. */
  calibration?: HealthCalibration[];
}

// ----------------------------------------------------------------------------- project

/** `ds4/toolExecuted` params: an agent tool ran and may have changed files. */
export interface ToolExecutedParams {
  /** The tool's name, e.g. `write`, `edit`, `bash`, `read`. */
  tool: string;
  /** Files it touched when known: absolute, or relative to the workspace root. */
  paths?: string[];
}

/** `ds4/indexUpdated` params: sent after each project sync the server runs. */
export interface IndexUpdatedParams {
  reason: 'initial' | 'trust' | 'edit' | 'watched' | 'tool' | 'rebuild' | 'workspace';
  /** Paths synced (relative to the root), or `null` for a full sync. */
  only: string[] | null;
  status: 'ready' | 'error' | 'untrusted' | 'no-workspace' | 'disabled';
  /** Present with status `error`. */
  error?: string;
  projectPath: string | null;
  filesIndexed: number;
  filesUnchanged: number;
  filesDeleted: number;
  filesSkipped: number;
  snippets: number;
  durationMs: number;
  truncated: boolean;
  /** Files longer than 200 windows of 80 lines, whose end is not searched. */
  partialFiles?: string[];
  warnings: string[];
}

// ----------------------------------------------------------------------------- compaction

export type CompactionReason = 'manual' | 'threshold' | 'overflow';

/** `ds4/compact` params (docs/compaction.md "The flow"). */
export interface CompactParams {
  session: SessionRef;
  /** Default `manual`. */
  reason?: CompactionReason;
  /** The first entry kept verbatim (the span ends before it); default: keep the most recent
   * `compaction.keepRecentTokens` tokens. */
  firstKeptEntryId?: string;
  /** When given, must be the branch's current root (checked). */
  previousSummaryId?: string;
  /** Passed on to the summarizer's prompt. */
  customInstructions?: string;
  /** Servers with privacy: the model that will read the `ds4/summarize` prompt. */
  model?: { provider?: string; id?: string };
}

/** The compaction entry the agent (Pi) appends to the session; ds4 never writes it. */
export interface CompactionEntry {
  /** The new root's text (Markdown, the twelve sections). */
  summary: string;
  firstKeptEntryId: string | null;
  tokensBefore: number;
  /** `{readFiles, modifiedFiles, ds4ContextEngine: {schemaVersion: 2, ...}}`. */
  details: Record<string, unknown>;
}

export interface CompactResult {
  compaction: CompactionEntry;
  /** The new root: the node whose text is `compaction.summary`. */
  summaryId: string;
  /** The new segment (equal to `summaryId` when there was no previous root). */
  segmentSummaryId: string;
  operationId?: string;
  summaryKind: 'segment' | 'aggregate';
  graphLevel: number;
  /** Who wrote the segment text: the client (`ds4/summarize`) or the offline summarizer. */
  summarizer: 'client' | 'offline';
  /** Why the offline summarizer was used; `null` when the client's summary was. */
  fallbackReason: string | null;
  validation: {
    status: 'valid' | 'warning' | 'invalid';
    /** Issues found before repairs. */
    issueCodes: string[];
    /** Repairs applied, in order. */
    repairs: string[];
  };
  span: {
    messageCount: number;
    /** Tokens summarized. */
    tokens: number;
    keptTokens?: number;
    isSplitTurn: boolean;
    firstKeptEntryId: string | null;
    previousSummaryId: string | null;
    sourceEntryCount?: number;
  };
  /** `{summary, limit}`: the root's size and the limit, tokens. */
  tokens?: { summary: number; limit: number };
  warnings: string[];
  /** Servers with owned sessions: `true` when the server appended the entry itself (`entryId`). */
  appended?: boolean;
  entryId?: string | null;
}

/** `ds4/summarize` params: the server asks the client for one summary. */
export interface SummarizeParams {
  summaryKind: 'segment';
  /** The complete prompt: contract, file lists, previous summary, conversation source. */
  prompt: string;
  sourceHash: string;
  /** The most tokens the summary may have. */
  tokenLimit: number;
  sessionId: string;
  sourceEntryIds: string[];
  readFiles: string[];
  modifiedFiles: string[];
}

/** `ds4/summarize` result. */
export interface SummarizeResult {
  summary: string;
  provider?: string;
  model?: string;
}

/** `ds4/compactCommitted` params. */
export interface CompactCommittedParams {
  /** The operation's root (`CompactResult.summaryId`). */
  summaryId: string;
  /** The id of the Pi entry that carries it, if known. */
  entryId?: string;
}

/** `ds4/compactFailed` params. */
export interface CompactFailedParams {
  summaryId: string;
  reason?: string;
}

/** The argument of the `ds4.summaries` command. */
export interface SummariesParams {
  session: SessionRef;
  /** `dot` adds the Graphviz text as `dot`. Default `json`. */
  format?: 'json' | 'dot';
}

/** One node of a summary graph (no content). */
export interface SummaryGraphNode {
  summaryId: string;
  kind: 'segment' | 'aggregate' | 'branch';
  level: number;
  lifecycle: 'prepared' | 'committed' | 'failed';
  validationStatus: string;
  validationIssueCodes: string[];
  createdAt: string | null;
  provider: string | null;
  model: string | null;
  /** chars-v1 estimate of the content. */
  tokens: number;
  sourceEntryCount: number;
  childIds: string[];
  piEntryId: string | null;
  firstKeptEntryId: string | null;
  reason: string | null;
  /** `active-root`, `active`, `past-head`, `alternate-branch`, `inner`, `prepared`, `failed`. */
  role: string;
}

export interface SummariesResult {
  sessionId: string;
  sessionFile?: string | null;
  leafId?: string | null;
  activeRootId: string | null;
  nodes: SummaryGraphNode[];
  roots: { summaryId: string; role: string }[];
  /** `{nodes, committed, prepared, failed, roots, <role>: n}`. */
  counts: Record<string, number>;
  /** The graph as an indented text tree. */
  tree: string;
  /** Graphviz DOT; present with `format: 'dot'`. */
  dot?: string;
}

// ----------------------------------------------------------------------------- memory and pins

export type PinScope = 'session' | 'branch' | 'project';
export type MemoryScope = 'session' | 'project';
export const PIN_SCOPES: readonly PinScope[] = ['session', 'branch', 'project'];
export const MEMORY_SCOPES: readonly MemoryScope[] = ['session', 'project'];

/** `ds4/pin`: text every plan of the session must carry (within `context.maxPinnedTokens`). */
export interface PinParams {
  session: SessionRef;
  content: string;
  /** Default `session`. */
  scope?: PinScope;
  classification?: PrivacyLevel;
  sourceEntryId?: string;
  /** The file the text was taken from. */
  sourceFile?: string;
  /** The active pin this one replaces. */
  supersedes?: string;
}

/** `ds4/unpin`: mark an active pin `deleted`. */
export interface UnpinParams {
  session: SessionRef;
  pinId: string;
  reason?: string;
}

/** `ds4/remember`: a short claim about the project or the session. */
export interface RememberParams {
  session: SessionRef;
  claim: string;
  /** Default `project`. */
  scope?: MemoryScope;
  /** The conflict key; default: the claim's automatic keys (docs/memory.md "Conflicts"). */
  key?: string;
  classification?: PrivacyLevel;
  sourceEntryIds?: string[];
  /** The active memory item this claim replaces (what a conflict error asks for). */
  supersedes?: string;
}

/** `ds4/forget`: mark an active memory item `invalid` (default) or `expired`. */
export interface ForgetParams {
  session: SessionRef;
  memoryId: string;
  status?: 'invalid' | 'expired';
  reason?: string;
}

export type ContextCustomType = 'ds4-context-pin-v1' | 'ds4-context-memory-v1';

/**
 * A complete Pi custom entry line for the session file: a new 8-hex `id`, `parentId` the
 * file's current leaf, an ISO 8601 `timestamp`, and the write's `customType` and `data`.
 */
export interface ContextMutationEntry {
  type: 'custom';
  id: string;
  parentId: string | null;
  timestamp: string;
  customType: ContextCustomType;
  data: Record<string, unknown>;
}

/**
 * What every pin/memory write returns: the Pi custom entry that records it. With `appended`
 * the server wrote it itself (a session it owns; `entryId` is the new entry). Otherwise ds4
 * never writes the file: the agent's Pi extension records it with `pi.appendEntry(customType,
 * data)`, or someone appends `entry` (the complete line; older servers send none) to the file.
 */
export interface ContextMutationResult {
  customType: ContextCustomType;
  data: { schemaVersion: 1; mutationId: string; createdAt: number; operation: string } & Record<string, unknown>;
  /** The pin or memory id the write created or changed. */
  itemId: string;
  appended: boolean;
  entryId: string | null;
  /** The complete entry line to append to the session file (servers since issue 15's fixes). */
  entry?: ContextMutationEntry;
}

/** `ds4/memory` params. */
export interface MemoryParams {
  /** List what applies to this session (and sync it first); default every item. */
  session?: SessionRef;
  /** Also superseded, invalid, expired and deleted items. */
  includeInactive?: boolean;
}

export interface MemoryItem {
  id: string;
  scope: MemoryScope;
  /** `active`, `superseded`, `invalid`, `expired`. */
  status: string;
  key: string | null;
  claim: string;
  projectPath: string | null;
  classification: string | null;
  /** ms since the epoch. */
  createdAt: number;
  updatedAt: number;
  supersededBy: string | null;
  statusReason: string | null;
  provenance: { sessionId: string; mutationKey: string; mutationKeys: string[]; sourceEntryIds: string[] };
}

export interface PinItem {
  id: string;
  scope: PinScope;
  /** `active`, `superseded`, `deleted`. */
  status: string;
  content: string;
  projectPath: string | null;
  classification: string | null;
  createdAt: number;
  updatedAt: number;
  supersededBy: string | null;
  statusReason: string | null;
  provenance: {
    sessionId: string;
    mutationKey: string;
    mutationKeys: string[];
    branchLeafId: string | null;
    sourceEntryId: string | null;
    sourceFile: string | null;
  };
}

/** A stored mutation entry that was rejected or invalid. */
export interface MemoryProblem {
  mutationKey: string;
  sessionId: string;
  entryId: string;
  kind: string;
  problem: string;
}

export interface MemoryResult {
  sessionId: string | null;
  memory: MemoryItem[];
  pins: PinItem[];
  counts: { applied: number; rejected: number; invalid: number };
  problems: MemoryProblem[];
}

// ----------------------------------------------------------------------------- artifacts

/** `ds4/artifactSearch`: `artifactId` or `session` is required. */
export interface ArtifactSearchParams {
  /** 1..1000 characters; literal, case-insensitive. */
  query: string;
  /** 64 lower-case hex: search this artifact only. */
  artifactId?: string;
  /** Search the artifacts referenced on the session's active branch. */
  session?: SessionRef;
  /** 1..100; default `artifacts.maxSearchMatches`. */
  maxMatches?: number;
}

export interface ArtifactMatch {
  artifactId: string;
  /** The session entry that referenced the artifact, or `null`. */
  sourceId: string | null;
  /** 1-based. */
  line: number;
  /** 1-based, UTF-16 code units. */
  column: number;
  /** Bounded, secrets redacted. */
  excerpt: string;
}

export interface ArtifactSearchResult {
  query: string;
  matches: ArtifactMatch[];
  searched: { artifactId: string; status: 'ok' | 'missing' | 'corrupt' | 'too-large' }[];
  truncated: boolean;
}

// ----------------------------------------------------------------------------- owned sessions

/** `ds4/sessionOpen`: create (or, with `sessionId`, reopen) a session file the server owns. */
export interface SessionOpenParams {
  /** Default: the workspace root, else the server's cwd. */
  cwd?: string;
  /** At most 200 characters (Pi's `session_info` name). */
  title?: string;
  /** Reopen this owned session. */
  sessionId?: string;
}

export interface SessionOpenResult {
  sessionId: string;
  file: string;
  leafId: string | null;
  created: boolean;
  /** The session's working directory (its header's `cwd`); a reopen keeps it. */
  cwd?: string;
}

/** `ds4/sessionAppend`: append Pi messages (user, assistant, toolResult) to an owned session. */
export interface SessionAppendParams {
  session: SessionRef;
  /** 1..1000 messages in Pi's shapes. */
  messages: AgentMessage[];
  /** Default: the current leaf. */
  parentId?: string;
}

export interface SessionAppendResult {
  sessionId: string;
  file: string;
  entryIds: string[];
  leafId: string;
}

// ----------------------------------------------------------------------------- initialize

/** `initializationOptions` of `initialize`. */
export interface InitializationOptions {
  /** Whether the editor trusts the workspace. */
  trusted: boolean;
  /** Server settings (docs/configuration.md), nested. */
  settings: Record<string, unknown>;
  /** The database file; overrides `DS4_DB` and `storage.databasePath`. */
  databasePath?: string;
}

// ----------------------------------------------------------------------------- guards

type Check = (value: unknown) => boolean;

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const str: Check = (v) => typeof v === 'string';
const num: Check = (v) => typeof v === 'number' && Number.isFinite(v);
const int: Check = (v) => Number.isInteger(v);
const bool: Check = (v) => typeof v === 'boolean';
const obj: Check = isObject;
const nullable =
  (check: Check): Check =>
  (v) =>
    v === null || check(v);
const optional =
  (check: Check): Check =>
  (v) =>
    v === undefined || check(v);
const oneOf =
  (...options: string[]): Check =>
  (v) =>
    typeof v === 'string' && options.includes(v);
const arrayOf =
  (check: Check): Check =>
  (v) =>
    Array.isArray(v) && v.every(check);
const numbersRecord: Check = (v) => isObject(v) && Object.values(v).every(num);
/** A budget: numbers, and `autoTuned` a boolean (servers with model awareness). */
const budgetRecord: Check = (v) =>
  isObject(v) && Object.entries(v).every(([key, value]) => (key === 'autoTuned' ? bool(value) : num(value)));

type Shape = Record<string, Check>;

/** The paths (from `path`) of the fields of `value` that fail their check. */
function checkShape(value: unknown, shape: Shape, path: string): string[] {
  if (!isObject(value)) {
    return [path];
  }
  return Object.entries(shape)
    .filter(([key, check]) => !check(value[key]))
    .map(([key]) => `${path}.${key}`);
}

const shaped =
  (shape: Shape): Check =>
  (v) =>
    checkShape(v, shape, '').length === 0;

const SCOPE_RELEVANCE: Shape = {
  status: str,
  sent: int,
  belowFloor: int,
  floor: nullable(num),
  best: nullable(num),
  why: nullable(str),
};
/** A `relevance` object: each scope present has the `ScopeRelevance` shape (others are ignored). */
const relevanceRecord: Check = (v) =>
  isObject(v) && ['history', 'project', 'git'].every((scope) => v[scope] === undefined || shaped(SCOPE_RELEVANCE)(v[scope]));

const countsRecord: Check = (v) => isObject(v) && Object.values(v).every(int);

/**
 * A `privacy` object. Only `enabled` is required: a plan must not be refused because a
 * counter is missing, so the views read the rest defensively.
 */
const PRIVACY_SUMMARY: Shape = {
  enabled: bool,
  destination: optional(
    nullable(shaped({ provider: nullable(str), kind: oneOf('local', 'remote'), allowed: arrayOf(str), redactSecrets: bool })),
  ),
  classified: optional(countsRecord),
  redacted: optional(int),
  redactedByKind: optional(countsRecord),
  withheld: optional(countsRecord),
  excluded: optional(countsRecord),
};

const MANIFEST_ITEM: Shape = {
  kind: str,
  sourceId: str,
  groupId: nullable(str),
  classification: nullable(str),
  tokens: int,
  score: nullable(num),
  reason: str,
  count: optional(int),
  lastSourceId: optional(str),
};

const PLAN_RESULT: Shape = {
  mode: oneOf('managed', 'observer', 'fallback'),
  messages: arrayOf(obj),
  manifestId: str,
  manifestStored: bool,
  estimatedTokens: int,
  budget: budgetRecord,
  model: shaped({ provider: str, id: str, contextWindow: int, source: str }),
  warnings: arrayOf(str),
  stats: obj,
  fallbackReason: optional(str),
  session: optional(shaped({ id: str, file: str, leafId: nullable(str) })),
  privacy: optional(nullable(shaped(PRIVACY_SUMMARY))),
  continuation: optional(nullable(obj)),
};

const RETRIEVE_RESULT: Shape = {
  status: oneOf('ok', 'no-query', 'disabled', 'no-session'),
  query: nullable(str),
  history: arrayOf(
    shaped({
      entryKey: str,
      entryId: str,
      role: nullable(str),
      createdAt: nullable(str),
      score: num,
      reason: str,
      excerpt: str,
      tokens: int,
    }),
  ),
  project: arrayOf(obj),
  stats: obj,
  warnings: arrayOf(str),
  relevance: optional(relevanceRecord),
  git: optional(
    arrayOf(
      shaped({
        hash: str,
        committedAt: str,
        subject: str,
        files: arrayOf(str),
        filesTotal: int,
        score: num,
        reason: str,
        withheld: optional(str),
        quoted: str,
        tokens: int,
      }),
    ),
  ),
  gitStatus: optional(oneOf('untrusted', 'no-workspace', 'disabled', 'no-git', 'no-index', 'no-query', 'error', 'ok')),
  privacy: optional(nullable(shaped(PRIVACY_SUMMARY))),
};

const MANIFEST: Shape = {
  id: str,
  createdAt: str,
  contextWindow: int,
  outputReserve: int,
  hardInputLimit: int,
  targetInputTokens: int,
  estimatedTokens: int,
  actualTokens: nullable(int),
  fixedTokens: int,
  budgets: budgetRecord,
  included: optional(arrayOf(shaped(MANIFEST_ITEM))),
  excluded: optional(arrayOf(shaped(MANIFEST_ITEM))),
  retrieved: arrayOf(shaped({ entryKey: str, score: num, reason: str })),
  planning: shaped({ mode: str, tokens: numbersRecord }),
  relevance: optional(relevanceRecord),
  warnings: arrayOf(str),
  privacy: optional(nullable(shaped(PRIVACY_SUMMARY))),
  // Model awareness and continuation: objects the views read defensively (a manifest is never
  // refused over one of their fields).
  usage: optional(nullable(obj)),
  modelAwareness: optional(nullable(obj)),
  continuation: optional(nullable(obj)),
};

const PRIVACY_ANSWER: Shape = {
  enabled: bool,
  provider: nullable(str),
  kind: oneOf('local', 'remote'),
  allowed: arrayOf(str),
  withheld: arrayOf(str),
  redactSecrets: bool,
  explanation: str,
  rule: optional(str),
};

const HEALTH_RESULT: Shape = {
  status: oneOf('ok', 'warning'),
  databasePath: str,
  sessions: int,
  entries: int,
  manifests: int,
  notices: arrayOf(str),
  configWarnings: arrayOf(str),
  warnings: optional(arrayOf(str)),
  project: optional(shaped({ status: str, projectPath: nullable(str), trusted: bool })),
  server: shaped({ name: str, version: str, trusted: bool }),
  calibration: optional(arrayOf(obj)),
};

const REBUILD_INDEX_RESULT: Shape = {
  sessions: int,
  entries: int,
  failed: arrayOf(shaped({ sessionFile: str, error: str })),
  durationMs: num,
  results: arrayOf(obj),
};

const INDEX_UPDATED: Shape = {
  reason: str,
  status: str,
  error: optional(str),
  filesIndexed: int,
  snippets: int,
  truncated: bool,
  warnings: arrayOf(str),
};

const COMPACT_RESULT: Shape = {
  compaction: shaped({ summary: str, firstKeptEntryId: nullable(str), tokensBefore: int, details: obj }),
  summaryId: str,
  segmentSummaryId: str,
  summaryKind: str,
  graphLevel: int,
  summarizer: oneOf('client', 'offline'),
  fallbackReason: nullable(str),
  validation: shaped({ status: str, issueCodes: arrayOf(str), repairs: arrayOf(str) }),
  span: shaped({ messageCount: int, tokens: int, isSplitTurn: bool, firstKeptEntryId: nullable(str) }),
  warnings: arrayOf(str),
};

const SUMMARIES_RESULT: Shape = {
  sessionId: str,
  activeRootId: nullable(str),
  nodes: arrayOf(
    shaped({ summaryId: str, kind: str, level: int, lifecycle: str, childIds: arrayOf(str), role: str }),
  ),
  roots: arrayOf(shaped({ summaryId: str, role: str })),
  counts: numbersRecord,
  tree: str,
  dot: optional(str),
};

const SUMMARIZE_PARAMS: Shape = {
  summaryKind: str,
  prompt: str,
  sourceHash: str,
  tokenLimit: int,
  sessionId: str,
  sourceEntryIds: arrayOf(str),
  readFiles: arrayOf(str),
  modifiedFiles: arrayOf(str),
};

const CONTEXT_MUTATION_RESULT: Shape = {
  customType: oneOf('ds4-context-pin-v1', 'ds4-context-memory-v1'),
  data: shaped({ schemaVersion: int, mutationId: str, createdAt: num, operation: str }),
  itemId: str,
  appended: bool,
  entryId: nullable(str),
  entry: optional(
    shaped({ type: oneOf('custom'), id: str, parentId: nullable(str), timestamp: str, customType: str, data: obj }),
  ),
};

const MEMORY_ITEM: Shape = { id: str, scope: str, status: str, claim: str, createdAt: num, provenance: obj };
const PIN_ITEM: Shape = { id: str, scope: str, status: str, content: str, createdAt: num, provenance: obj };

const MEMORY_RESULT: Shape = {
  sessionId: nullable(str),
  memory: arrayOf(shaped(MEMORY_ITEM)),
  pins: arrayOf(shaped(PIN_ITEM)),
  counts: countsRecord,
  problems: arrayOf(obj),
};

const ARTIFACT_SEARCH_RESULT: Shape = {
  query: str,
  matches: arrayOf(shaped({ artifactId: str, sourceId: nullable(str), line: int, column: int, excerpt: str })),
  searched: arrayOf(shaped({ artifactId: str, status: str })),
  truncated: bool,
};

const SESSION_OPEN_RESULT: Shape = { sessionId: str, file: str, leafId: nullable(str), created: bool };
const SESSION_APPEND_RESULT: Shape = { sessionId: str, file: str, entryIds: arrayOf(str), leafId: str };

/** Fields of a `ds4/pin`, `ds4/unpin`, `ds4/remember` or `ds4/forget` result that do not fit the contract. */
export const checkContextMutationResult = (value: unknown): string[] =>
  checkShape(value, CONTEXT_MUTATION_RESULT, 'result');
/** Fields of a `ds4/memory` result that do not fit the contract. */
export const checkMemoryResult = (value: unknown): string[] => checkShape(value, MEMORY_RESULT, 'result');
/** Fields of a `ds4/artifactSearch` result that do not fit the contract. */
export const checkArtifactSearchResult = (value: unknown): string[] =>
  checkShape(value, ARTIFACT_SEARCH_RESULT, 'result');
/** Fields of a `ds4/sessionOpen` result that do not fit the contract. */
export const checkSessionOpenResult = (value: unknown): string[] =>
  checkShape(value, SESSION_OPEN_RESULT, 'result');
/** Fields of a `ds4/sessionAppend` result that do not fit the contract. */
export const checkSessionAppendResult = (value: unknown): string[] =>
  checkShape(value, SESSION_APPEND_RESULT, 'result');

/** Fields of a `ds4/plan` result that do not fit the contract (paths from `result`). */
export const checkPlanResult = (value: unknown): string[] =>
  checkShape(value, PLAN_RESULT, 'result');
/** Fields of a `ds4/retrieve` result that do not fit the contract. */
export const checkRetrieveResult = (value: unknown): string[] =>
  checkShape(value, RETRIEVE_RESULT, 'result');
/** Fields of a `ds4/manifest` result that do not fit the contract. */
export const checkManifest = (value: unknown): string[] => checkShape(value, MANIFEST, 'result');
/** Fields of a `ds4.health` result that do not fit the contract. */
export const checkHealthResult = (value: unknown): string[] =>
  checkShape(value, HEALTH_RESULT, 'result');
/** Fields of a `ds4.rebuildIndex` result that do not fit the contract. */
export const checkRebuildIndexResult = (value: unknown): string[] =>
  checkShape(value, REBUILD_INDEX_RESULT, 'result');

/** Fields of a `ds4/compact` result that do not fit the contract. */
export const checkCompactResult = (value: unknown): string[] =>
  checkShape(value, COMPACT_RESULT, 'result');
/** Fields of a `ds4.summaries` result that do not fit the contract. */
export const checkSummariesResult = (value: unknown): string[] =>
  checkShape(value, SUMMARIES_RESULT, 'result');
/** Fields of a `ds4.privacy` answer that do not fit the contract. */
export const checkPrivacyAnswer = (value: unknown): string[] =>
  checkShape(value, PRIVACY_ANSWER, 'result');
/** Fields of `ds4/summarize` params that do not fit the contract (paths from `params`). */
export const checkSummarizeParams = (value: unknown): string[] =>
  checkShape(value, SUMMARIZE_PARAMS, 'params');

/** Fields of `ds4/indexUpdated` params that do not fit the contract (paths from `params`). */
export const checkIndexUpdated = (value: unknown): string[] =>
  checkShape(value, INDEX_UPDATED, 'params');

export const isPlanResult = (value: unknown): value is PlanResult =>
  checkPlanResult(value).length === 0;
export const isRetrieveResult = (value: unknown): value is RetrieveResult =>
  checkRetrieveResult(value).length === 0;
export const isManifest = (value: unknown): value is Manifest => checkManifest(value).length === 0;
export const isHealthResult = (value: unknown): value is HealthResult =>
  checkHealthResult(value).length === 0;
export const isRebuildIndexResult = (value: unknown): value is RebuildIndexResult =>
  checkRebuildIndexResult(value).length === 0;
export const isIndexUpdated = (value: unknown): value is IndexUpdatedParams =>
  checkIndexUpdated(value).length === 0;
export const isCompactResult = (value: unknown): value is CompactResult =>
  checkCompactResult(value).length === 0;
export const isSummariesResult = (value: unknown): value is SummariesResult =>
  checkSummariesResult(value).length === 0;
export const isPrivacyAnswer = (value: unknown): value is PrivacyAnswer =>
  checkPrivacyAnswer(value).length === 0;
export const isSummarizeParams = (value: unknown): value is SummarizeParams =>
  checkSummarizeParams(value).length === 0;

/** A non-negative safe integer (token counts). */
const count: Check = (v) => Number.isSafeInteger(v) && (v as number) >= 0;
const nonEmpty: Check = (v) => typeof v === 'string' && v.trim() !== '';
/** The longest `provider` / `model` and `stopReason` the server accepts (characters). */
export const USAGE_MAX_NAME_CHARS = 256;
export const USAGE_MAX_STOP_REASON_CHARS = 64;
const boundedName: Check = (v) => nonEmpty(v) && (v as string).length <= USAGE_MAX_NAME_CHARS;
const stopReason: Check = (v) => typeof v === 'string' && v.length > 0 && v.length <= USAGE_MAX_STOP_REASON_CHARS;

/** `value` for an error message: JSON, cut to 40 characters. */
function shown(value: unknown): string {
  const json = JSON.stringify(value) as string | undefined;
  const text = value === undefined ? 'nothing' : (json ?? typeof value);
  return text.length > 40 ? `${text.slice(0, 39)}…` : text;
}

/**
 * What is wrong with `ds4/continuationFailed` params, one sentence per field naming it; empty
 * when they fit: `session.file` a non-empty string; `provider`, `model`, `reason` strings when
 * given.
 */
export function continuationFailedProblems(value: unknown): string[] {
  if (!isObject(value)) {
    return [`params must be an object, got ${shown(value)}`];
  }
  const session = value.session;
  const problems =
    isObject(session) && nonEmpty(session.file)
      ? []
      : [`params.session.file must be a non-empty string (the plan's session file), got ${shown(isObject(session) ? session.file : session)}`];
  for (const key of ['provider', 'model']) {
    if (!optional(str)(value[key])) {
      problems.push(`params.${key} must be a string when given, got ${shown(value[key])}`);
    }
  }
  return problems;
}

/**
 * What is wrong with `ds4/usage` params, one sentence per field naming it (`params.usage.input
 * must be an integer >= 0, got -1`); empty when they fit the contract (docs/protocol.md
 * `ds4/usage`): `manifestId` a non-empty string, `provider` and `model` non-empty strings of at
 * most 256 characters; `usage.input` and, when given, `usage.output`, `usage.cacheRead`,
 * `usage.cacheWrite` integers >= 0 (other keys of Pi's `Usage`, e.g. `totalTokens`, `cost`,
 * are allowed and ignored); `stopReason` a string of 1..64 characters,
 * `outputItems` objects, `outputItemHashes` strings, `hasResponseId` a boolean, when given.
 */
export function usageParamsProblems(value: unknown): string[] {
  if (!isObject(value)) {
    return [`params must be an object, got ${shown(value)}`];
  }
  const problems: string[] = [];
  const need = (ok: boolean, field: string, what: string, got: unknown): void => {
    if (!ok) {
      problems.push(`params.${field} must be ${what}, got ${shown(got)}`);
    }
  };
  need(nonEmpty(value.manifestId), 'manifestId', 'a non-empty string', value.manifestId);
  for (const key of ['provider', 'model']) {
    need(boundedName(value[key]), key, `a non-empty string of at most ${String(USAGE_MAX_NAME_CHARS)} characters`, value[key]);
  }
  const usage = value.usage;
  if (!isObject(usage)) {
    need(false, 'usage', 'an object with integer token counts ({input, output?, cacheRead?, cacheWrite?})', usage);
  } else {
    need(count(usage.input), 'usage.input', 'an integer >= 0', usage.input);
    for (const key of ['output', 'cacheRead', 'cacheWrite']) {
      need(optional(count)(usage[key]), `usage.${key}`, 'an integer >= 0 when given', usage[key]);
    }
  }
  need(
    optional(stopReason)(value.stopReason),
    'stopReason',
    `Pi's stop reason (1..${String(USAGE_MAX_STOP_REASON_CHARS)} characters) when given`,
    value.stopReason,
  );
  need(optional(arrayOf(obj))(value.outputItems), 'outputItems', 'a list of objects when given', value.outputItems);
  need(
    optional(arrayOf(str))(value.outputItemHashes),
    'outputItemHashes',
    'a list of strings when given',
    value.outputItemHashes,
  );
  need(optional(bool)(value.hasResponseId), 'hasResponseId', 'true or false when given', value.hasResponseId);
  return problems;
}
