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
  CompactParams,
  CompactResult,
  ContinuationFailedParams,
  Manifest,
  ManifestParams,
  PlanParams,
  PlanResult,
  PrivacyAnswer,
  PrivacyParams,
  RetrieveParams,
  RetrieveResult,
  SummariesParams,
  SummariesResult,
  ToolExecutedParams,
  UsageParams,
} from './protocol';

export type * from './protocol';

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
  /** Fires after every successful plan made through this API or the "DS4: Plan Request" command. */
  readonly onDidPlan: Event<PlanResult>;
}
