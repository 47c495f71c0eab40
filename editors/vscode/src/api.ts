/**
 * The API `activate()` returns to other extensions:
 *
 * ```ts
 * const ds4 = await vscode.extensions.getExtension<Ds4Api>('ds4.ds4-lsp')?.activate();
 * const plan = await ds4?.plan({ session: { file }, request: 'next step' });
 * ```
 *
 * Each call waits for the server to be running and rejects with the server's message when
 * it answers with an error (e.g. InvalidParams naming the field), or with a
 * `Ds4ContractError` when the answer does not have the documented shape; `reportUsage` rejects
 * bad params with a `Ds4InvalidParamsError` naming the field before anything is sent. Wire types:
 * `protocol.ts` (docs/protocol.md).
 */

import type { Event } from 'vscode';

import type {
  ArtifactSearchParams,
  ArtifactSearchResult,
  CompactParams,
  CompactResult,
  ContextMutationResult,
  ContinuationFailedParams,
  ForgetParams,
  Manifest,
  ManifestParams,
  MemoryParams,
  MemoryResult,
  PinParams,
  PlanParams,
  PlanResult,
  PrivacyAnswer,
  PrivacyParams,
  RememberParams,
  RetrieveParams,
  RetrieveResult,
  SummariesParams,
  SessionAppendParams,
  SessionAppendResult,
  SessionOpenParams,
  SessionOpenResult,
  SessionRef,
  SummariesResult,
  ToolExecutedParams,
  UnpinParams,
  UsageParams,
} from './protocol';

export type * from './protocol';

/**
 * Params whose `session` may be left out: the extension then uses the last Pi session used in
 * this window, else the workspace's server-owned session (`sessionOpen()`).
 */
export type WithDefaultSession<T extends { session: SessionRef }> = Omit<T, 'session'> & { session?: SessionRef };

export interface Ds4Api {
  /** `ds4/plan`: plan the messages of the next model call within the model's budget. */
  plan(params: PlanParams): Promise<PlanResult>;
  /**
   * `ds4/retrieve`: rank evidence for a query in the `scopes` asked for (default history):
   * the session transcript, the trusted workspace's files (`project`) and/or the commits of
   * its Git history (`git`). `relevance` says per scope why nothing was sent.
   */
  retrieve(params?: RetrieveParams): Promise<RetrieveResult>;
  /** `ds4/manifest`: a plan's manifest (metadata only) by id, or a session's latest. */
  manifest(params: ManifestParams): Promise<Manifest>;
  /**
   * `ds4/toolExecuted`: report an agent tool run (`write`, `edit`, `bash`, ...) so the project
   * files it touched are re-read before the next plan. Resolves once sent.
   */
  toolExecuted(params: ToolExecutedParams): Promise<void>;
  /**
   * `ds4/compact`: summarize the older part of a session's active branch (docs/compaction.md).
   * With `ds4.compaction.useEditorModel` on, the server asks this extension for the summary and
   * a VS Code chat model writes it; otherwise, or when that fails, the server writes it offline
   * (`summarizer`, `fallbackReason`). Nothing is written to the session file: append
   * `result.compaction` as a Pi compaction entry, then call `compactCommitted` (or
   * `compactFailed`). Without `params.model`, and with the editor model on, the destination
   * of the summary prompt is named `{provider: 'vscode-lm'}` (a remote one unless listed in
   * `ds4.privacy.localProviders`), so the privacy policy applies to it.
   */
  compact(params: CompactParams): Promise<CompactResult>;
  /** `ds4.summaries`: a session's summary graph; `format: 'dot'` adds Graphviz DOT. */
  summaries(params: SummariesParams): Promise<SummariesResult>;
  /**
   * `ds4/compactCommitted`: the agent appended the compaction entry of `summaryId` (the
   * result's `summaryId`); `entryId` is that Pi entry's id, if known. Resolves once sent.
   */
  compactCommitted(summaryId: string, entryId?: string): Promise<void>;
  /** `ds4/compactFailed`: the agent did not append the entry of `summaryId`. Resolves once sent. */
  compactFailed(summaryId: string, reason?: string): Promise<void>;
  /**
   * `ds4.privacy`: what the destination `params.model` (`provider/model` or `provider`) may see under the
   * privacy policy: its class (local or remote), the levels allowed and withheld, whether
   * secrets are redacted, and an explanation.
   */
  privacy(params: PrivacyParams): Promise<PrivacyAnswer>;
  /**
   * `ds4/usage`: report what the provider said the response to a planned request cost, after
   * each response (Pi's `Usage` can be passed as `usage` as is):
   *
   * ```ts
   * await ds4.reportUsage({ manifestId: plan.manifestId, provider: 'anthropic', model: 'claude-sonnet-4-5',
   *   usage: { input: 1200, output: 310, cacheRead: 30000, cacheWrite: 0 }, stopReason: 'stop' });
   * ```
   *
   * The manifest then shows the actual input tokens (`input + cacheRead + cacheWrite`) and the
   * cache share, and the server calibrates that model's budgets from the reports
   * (docs/model-awareness.md). Resolves once sent (a notification: no answer); rejects with a
   * `Ds4InvalidParamsError` naming the field (`params.usage.input must be an integer >= 0,
   * got -1`) and sends nothing when the params do not fit. An open manifest view of that plan
   * is refreshed.
   */
  reportUsage(params: UsageParams): Promise<void>;
  /**
   * `ds4/continuationFailed`: the provider rejected the `previous_response_id` of a plan whose
   * `continuation.mode` was `delta` (a stale handle): the server drops the session's
   * continuation state (of `provider`/`model` when given), so the next plan is `full`. Resolves
   * once sent; rejects with a `Ds4InvalidParamsError` naming the field and sends nothing for
   * bad params (`session.file` is required).
   */
  continuationFailed(params: ContinuationFailedParams): Promise<void>;
  /**
   * `ds4/pin`: pin text (a rule, a selection) so every plan of the session carries it
   * (docs/memory.md). Every write below returns the Pi custom entry that records it: for a
   * session the server owns it is already appended (`appended: true`, `entryId`). A Pi session
   * is never written by ds4: nothing is recorded until your Pi extension calls
   * `pi.appendEntry(result.customType, result.data)`, or `result.entry` (the complete line:
   * id, parentId, timestamp; absent from older servers) is appended to the session file; the
   * server imports it when the session grows. A refused write (a repeat, an unknown or inactive
   * id) rejects with the server's `RequestFailed` (-32803) `ResponseError`, whose message says
   * what to do.
   */
  pin(params: WithDefaultSession<PinParams>): Promise<ContextMutationResult>;
  /** `ds4/unpin`: mark the active pin `pinId` deleted. */
  unpin(params: WithDefaultSession<UnpinParams>): Promise<ContextMutationResult>;
  /**
   * `ds4/remember`: record a claim (`scope` default `project`). A claim that conflicts with an
   * active item (same key, another value; opposite polarity) rejects with `RequestFailed` and
   * `error.data.conflictsWith` (`error.data.kind` "conflict"; a repeat is "repeat"); pass that
   * id as `supersedes` to replace a conflicting item.
   */
  remember(params: WithDefaultSession<RememberParams>): Promise<ContextMutationResult>;
  /** `ds4/forget`: mark the active memory item `memoryId` invalid (default) or expired. */
  forget(params: WithDefaultSession<ForgetParams>): Promise<ContextMutationResult>;
  /** `ds4/memory`: the pins and memory items (of `params.session`, else all) with provenance. */
  memory(params?: MemoryParams): Promise<MemoryResult>;
  /**
   * `ds4/artifactSearch`: find literal text (case-insensitive) in stored tool outputs, of one
   * artifact (`artifactId`) or of those a session's active branch references (`session`);
   * excerpts are bounded and secrets redacted; private keys and text classified above
   * `privacy.remoteDefaultAllowed` (local-only always) are withheld: no match inside them, a
   * placeholder where an excerpt reaches into them.
   */
  artifactSearch(params: ArtifactSearchParams): Promise<ArtifactSearchResult>;
  /**
   * `ds4/sessionOpen`. Without params: the workspace's server-owned session, opened once per
   * workspace (its id kept in workspaceState, reopened by id after a reload; a failed reopen
   * rejects with the error and keeps the id, never opening another session); this is the
   * session the API and the `#ds4History` tool use when no Pi session was used in this window.
   * With params: the request as given (`cwd`, `title`, or `sessionId` to reopen).
   */
  sessionOpen(params?: SessionOpenParams): Promise<SessionOpenResult>;
  /**
   * `ds4/sessionAppend`: append Pi messages (user, assistant with tool calls, toolResult) to a
   * session the server owns (default: the workspace's, `sessionOpen()`); their entry ids. Plan,
   * retrieve, compact, pin and remember with `{file: result.file}` afterwards.
   */
  sessionAppend(params: WithDefaultSession<SessionAppendParams>): Promise<SessionAppendResult>;
  /** Fires after every successful plan made through this API or the "DS4: Plan Request" command. */
  readonly onDidPlan: Event<PlanResult>;
}
