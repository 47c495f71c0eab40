/**
 * Typed calls of the ds4 requests and commands over any JSON-RPC connection that can send
 * requests and follow `$/progress`: the extension passes its `LanguageClient`, the end-to-end
 * test a `vscode-jsonrpc` `MessageConnection` to the real server. Every answer is checked
 * against the contract (`protocol.ts`) before it is handed out.
 *
 * Pure module: no `vscode` import.
 */

import {
  ExecuteCommandRequest,
  type ExecuteCommandParams,
  type ProgressType,
  WorkDoneProgress,
  type WorkDoneProgressBegin,
  type WorkDoneProgressEnd,
  type WorkDoneProgressReport,
} from 'vscode-languageserver-protocol';

import {
  type ArtifactSearchParams,
  type ArtifactSearchResult,
  checkArtifactSearchResult,
  checkCompactResult,
  checkContextMutationResult,
  checkMemoryResult,
  checkSessionAppendResult,
  checkSessionOpenResult,
  type ContextMutationResult,
  DS4_ARTIFACT_SEARCH,
  DS4_FORGET,
  DS4_MEMORY,
  DS4_PIN,
  DS4_REMEMBER,
  DS4_SESSION_APPEND,
  DS4_SESSION_OPEN,
  DS4_UNPIN,
  type ForgetParams,
  type MemoryParams,
  type MemoryResult,
  type PinParams,
  type RememberParams,
  type SessionAppendParams,
  type SessionAppendResult,
  type SessionOpenParams,
  type SessionOpenResult,
  type UnpinParams,
  checkHealthResult,
  checkManifest,
  checkPlanResult,
  checkPrivacyAnswer,
  checkRebuildIndexResult,
  checkRetrieveResult,
  checkSummariesResult,
  type CompactParams,
  type CompactResult,
  DS4_COMPACT,
  DS4_COMPACT_COMMITTED,
  DS4_COMPACT_FAILED,
  DS4_CONTINUATION_FAILED,
  DS4_MANIFEST,
  DS4_PLAN,
  DS4_RETRIEVE,
  DS4_TOOL_EXECUTED,
  DS4_USAGE,
  HEALTH,
  type HealthResult,
  type Manifest,
  type ManifestParams,
  type PlanParams,
  type PlanResult,
  PRIVACY,
  type PrivacyAnswer,
  type PrivacyParams,
  REBUILD_INDEX,
  type RebuildIndexResult,
  type RetrieveParams,
  type RetrieveResult,
  SUMMARIES,
  type SummariesParams,
  type SummariesResult,
  type ToolExecutedParams,
  type ContinuationFailedParams,
  continuationFailedProblems,
  type UsageParams,
  usageParamsProblems,
} from './protocol';

/** What `LanguageClient` and `MessageConnection` have in common, as far as ds4 needs it. */
export interface Ds4Connection {
  sendRequest<R>(method: string, param: unknown): Promise<R>;
  sendNotification(method: string, params: unknown): Promise<void>;
  onProgress<P>(
    type: ProgressType<P>,
    token: string | number,
    handler: (value: P) => void,
  ): { dispose(): unknown };
}

export type WorkDoneProgressValue = WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd;

/** Called with each `$/progress` value of a command, `begin` first and `end` last. */
export type ProgressListener = (value: WorkDoneProgressValue) => void;

/** The server answered with something that is not the documented result shape. */
export class Ds4ContractError extends Error {
  constructor(
    readonly method: string,
    readonly fields: string[],
  ) {
    super(
      `${method}: the server's answer does not match the ds4 protocol (${fields.join(', ')}); ` +
        'are the extension and ds4-lsp the same version?',
    );
    this.name = 'Ds4ContractError';
  }
}

/**
 * The caller's params do not fit the contract; nothing was sent. `problems` name the fields
 * (`params.usage.input must be an integer >= 0, got -1`).
 */
export class Ds4InvalidParamsError extends Error {
  constructor(
    readonly method: string,
    readonly problems: string[],
  ) {
    super(`${method}: ${problems.join('; ')}`);
    this.name = 'Ds4InvalidParamsError';
  }
}

let tokenCounter = 0;

/** A fresh `workDoneToken`, unique within this process. */
export function newProgressToken(): string {
  tokenCounter += 1;
  return `ds4-client-${String(process.pid)}-${String(tokenCounter)}`;
}

export class Ds4Requests {
  constructor(private readonly connection: Ds4Connection) {}

  /** `ds4/plan`: plan the messages of the next model call. */
  plan(params: PlanParams): Promise<PlanResult> {
    return this.request(DS4_PLAN, params, checkPlanResult);
  }

  /** `ds4/retrieve`: rank evidence for a query (history, project files and/or Git commits, by `scopes`). */
  retrieve(params: RetrieveParams = {}): Promise<RetrieveResult> {
    return this.request(DS4_RETRIEVE, params, checkRetrieveResult);
  }

  /** `ds4/manifest`: a plan's manifest by `id`, or a session's latest. */
  manifest(params: ManifestParams): Promise<Manifest> {
    return this.request(DS4_MANIFEST, params, checkManifest);
  }

  /**
   * `ds4/toolExecuted`: tell the server an agent tool ran, so the project files it may have
   * changed are re-read before the next plan. A notification: there is no answer.
   */
  toolExecuted(params: ToolExecutedParams): Promise<void> {
    return this.connection.sendNotification(DS4_TOOL_EXECUTED, params);
  }

  /**
   * `ds4/usage`: what the provider reported for the response to a planned request (a
   * notification: there is no answer). The server stores it with the manifest (`actualTokens`,
   * `usage`) and calibrates the model's estimates from it. Throws `Ds4InvalidParamsError`,
   * naming the field, and sends nothing when `params` do not fit the contract.
   */
  usage(params: UsageParams): Promise<void> {
    const problems = usageParamsProblems(params);
    if (problems.length > 0) {
      return Promise.reject(new Ds4InvalidParamsError(DS4_USAGE, problems));
    }
    return this.connection.sendNotification(DS4_USAGE, params);
  }

  /**
   * `ds4/continuationFailed`: the provider rejected the `previous_response_id` of a native
   * continuation call; the server drops that state, so the next plan is `full`. Throws
   * `Ds4InvalidParamsError`, naming the field, and sends nothing for bad params.
   */
  continuationFailed(params: ContinuationFailedParams): Promise<void> {
    const problems = continuationFailedProblems(params);
    if (problems.length > 0) {
      return Promise.reject(new Ds4InvalidParamsError(DS4_CONTINUATION_FAILED, problems));
    }
    return this.connection.sendNotification(DS4_CONTINUATION_FAILED, params);
  }

  /**
   * `ds4/compact`: summarize the older part of the session's active branch. The server asks
   * this client for the summary with `ds4/summarize` when it declared that capability, else
   * (or when that fails) writes it offline. Nothing is written to the session file: the
   * result's `compaction` entry is for the agent (Pi) to append.
   */
  compact(params: CompactParams): Promise<CompactResult> {
    return this.request(DS4_COMPACT, params, checkCompactResult);
  }

  /** `ds4/compactCommitted`: the agent appended the compaction entry of `summaryId`. */
  compactCommitted(summaryId: string, entryId?: string): Promise<void> {
    return this.connection.sendNotification(DS4_COMPACT_COMMITTED, {
      summaryId,
      ...(entryId !== undefined && { entryId }),
    });
  }

  /** `ds4/compactFailed`: the agent did not append the compaction entry of `summaryId`. */
  compactFailed(summaryId: string, reason?: string): Promise<void> {
    return this.connection.sendNotification(DS4_COMPACT_FAILED, {
      summaryId,
      ...(reason !== undefined && { reason }),
    });
  }

  /**
   * `ds4/pin`: pin text to the session (its branch, or the project). The result is the
   * `ds4-context-pin-v1` entry: appended by the server for a session it owns (`appended`),
   * else for the agent (Pi) to append. A refused write (a repeat, an unknown `supersedes`)
   * rejects with the server's `RequestFailed` error (see `conflictOf`).
   */
  pin(params: PinParams): Promise<ContextMutationResult> {
    return this.request(DS4_PIN, params, checkContextMutationResult);
  }

  /** `ds4/unpin`: mark the active pin `params.pinId` deleted (an entry, like `pin`). */
  unpin(params: UnpinParams): Promise<ContextMutationResult> {
    return this.request(DS4_UNPIN, params, checkContextMutationResult);
  }

  /**
   * `ds4/remember`: record a claim (an entry, like `pin`). A claim that conflicts with an
   * active item rejects with `RequestFailed` and `data.conflictsWith`: ask again with
   * `supersedes` set to that id to replace it.
   */
  remember(params: RememberParams): Promise<ContextMutationResult> {
    return this.request(DS4_REMEMBER, params, checkContextMutationResult);
  }

  /** `ds4/forget`: mark the active memory item `params.memoryId` invalid or expired (an entry, like `pin`). */
  forget(params: ForgetParams): Promise<ContextMutationResult> {
    return this.request(DS4_FORGET, params, checkContextMutationResult);
  }

  /** `ds4/memory`: the pins and memory items (of a session, when given) with their provenance. */
  memory(params: MemoryParams = {}): Promise<MemoryResult> {
    return this.request(DS4_MEMORY, params, checkMemoryResult);
  }

  /** `ds4/artifactSearch`: literal, case-insensitive search in stored tool outputs (redacted excerpts). */
  artifactSearch(params: ArtifactSearchParams): Promise<ArtifactSearchResult> {
    return this.request(DS4_ARTIFACT_SEARCH, params, checkArtifactSearchResult);
  }

  /** `ds4/sessionOpen`: create a session file the server owns, or reopen one by `sessionId`. */
  sessionOpen(params: SessionOpenParams = {}): Promise<SessionOpenResult> {
    return this.request(DS4_SESSION_OPEN, params, checkSessionOpenResult);
  }

  /** `ds4/sessionAppend`: append Pi messages to a session the server owns; their entry ids. */
  sessionAppend(params: SessionAppendParams): Promise<SessionAppendResult> {
    return this.request(DS4_SESSION_APPEND, params, checkSessionAppendResult);
  }

  /** `ds4.summaries`: the session's summary graph (with `format: 'dot'` also Graphviz DOT). */
  summaries(params: SummariesParams, onProgress?: ProgressListener): Promise<SummariesResult> {
    return this.command(SUMMARIES, checkSummariesResult, onProgress, [params]);
  }

  /**
   * `ds4.privacy`: what the destination `params.model` (`provider/model` or `provider`) may see under the
   * server's privacy policy, and why.
   */
  privacy(params: PrivacyParams): Promise<PrivacyAnswer> {
    return this.command(PRIVACY, checkPrivacyAnswer, undefined, [params]);
  }

  /** `ds4.health`, reporting its progress to `onProgress`. */
  health(onProgress?: ProgressListener): Promise<HealthResult> {
    return this.command(HEALTH, checkHealthResult, onProgress);
  }

  /** `ds4.rebuildIndex`: re-read every known session, reporting progress to `onProgress`. */
  rebuildIndex(onProgress?: ProgressListener): Promise<RebuildIndexResult> {
    return this.command(REBUILD_INDEX, checkRebuildIndexResult, onProgress);
  }

  private async request<R>(method: string, params: unknown, check: (value: unknown) => string[]): Promise<R> {
    const result = await this.connection.sendRequest<unknown>(method, params);
    const problems = check(result);
    if (problems.length > 0) {
      throw new Ds4ContractError(method, problems);
    }
    return result as R;
  }

  /**
   * `workspace/executeCommand` with our own `workDoneToken`, so the server reports progress
   * on it rather than creating a token (which VS Code would show as a notification of its
   * own). `$/progress` arrives on the same stream before the answer, so every value has
   * been delivered when this resolves.
   */
  private async command<R>(
    command: string,
    check: (value: unknown) => string[],
    onProgress?: ProgressListener,
    args: unknown[] = [],
  ): Promise<R> {
    const workDoneToken = newProgressToken();
    const subscription = onProgress
      ? this.connection.onProgress(WorkDoneProgress.type, workDoneToken, onProgress)
      : undefined;
    try {
      const params: ExecuteCommandParams = { command, arguments: args, workDoneToken };
      return await this.request<R>(ExecuteCommandRequest.method, params, check);
    } finally {
      subscription?.dispose();
    }
  }
}
