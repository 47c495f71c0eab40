/**
 * The client side of `ds4/summarize` (docs/compaction.md "The flow", step 3): when
 * `ds4.compaction.useEditorModel` is on and VS Code has the language model API, the extension
 * declares `capabilities.experimental.ds4.summarize: true` at `initialize`, and the server then
 * asks it for each compaction summary. The summary is written by a chat model of the editor
 * (`vscode.lm`): the server's prompt is sent as one user message and the streamed text is the
 * answer. Any failure (no model, consent declined, quota, a model error, cancellation) is
 * answered with a JSON-RPC error, and the server falls back to its offline summarizer.
 *
 * Only ids and sizes are logged, never the prompt or the summary.
 *
 * Pure module: no `vscode` import. The extension passes `vscode.lm` through `LanguageModels`.
 */

import {
  type CancellationToken,
  type ClientCapabilities,
  ErrorCodes,
  LSPErrorCodes,
  ResponseError,
} from 'vscode-languageserver-protocol';

import { checkSummarizeParams, DS4_SUMMARIZE, type SummarizeParams, type SummarizeResult } from './protocol';
import type { SettingsReader } from './settings';

/** A chat model as far as the summarizer uses it (`vscode.LanguageModelChat`). */
export interface SummaryModel {
  readonly id: string;
  readonly vendor: string;
  readonly family: string;
  readonly name: string;
  /** The most tokens one request may send. */
  readonly maxInputTokens: number;
  sendRequest(
    messages: unknown[],
    options: { justification?: string },
    token: CancellationToken,
  ): PromiseLike<{ readonly text: AsyncIterable<string> }>;
}

/** The language model API as far as the summarizer uses it (`vscode.lm`). */
export interface LanguageModels {
  selectChatModels(selector: { family?: string }): PromiseLike<readonly SummaryModel[]>;
  /** A user message holding `text` (`vscode.LanguageModelChatMessage.User(text)`). */
  userMessage(text: string): unknown;
}

export interface SummarizeLog {
  info(line: string): void;
  warn(line: string): void;
}

export interface SummarizeOptions {
  lm: LanguageModels;
  /** The `ds4.compaction.modelFamily` setting, read at each request; empty: any model. */
  modelFamily(): string | undefined;
  log: SummarizeLog;
}

export type SummarizeHandler = (params: unknown, token: CancellationToken) => Promise<SummarizeResult>;

/** Shown in VS Code's consent dialog the first time the extension uses a model. */
export const CONSENT_JUSTIFICATION =
  'DS4 compacts your agent session: a language model writes the summary that replaces its older turns.';

/**
 * Whether to offer `ds4/summarize`: `ds4.compaction.useEditorModel` (default on) and a VS Code
 * with the language model API.
 */
export function offersSummarize(settings: SettingsReader, languageModelApi: boolean): boolean {
  return languageModelApi && settings.get('compaction.useEditorModel') !== false;
}

/** Add `experimental.ds4.summarize: true` to `capabilities`, keeping what is there. */
export function declareSummarize(capabilities: ClientCapabilities): void {
  const experimental = isRecord(capabilities.experimental) ? capabilities.experimental : {};
  const ds4 = isRecord(experimental.ds4) ? experimental.ds4 : {};
  capabilities.experimental = { ...experimental, ds4: { ...ds4, summarize: true } };
}

/** What `SummarizeFeature` needs of the language client: registering a request handler. */
export interface RequestHandlerRegistry {
  onRequest(
    method: string,
    handler: (params: unknown, token: CancellationToken) => Promise<unknown>,
  ): { dispose(): void };
}

/**
 * A static feature of the language client (vscode-languageclient's `StaticFeature`): it
 * declares the capability when `offer()` says so at `initialize`, and then answers
 * `ds4/summarize` with `handler`. Without the capability the server never sends the request,
 * so no handler is registered.
 */
export class SummarizeFeature {
  private declared = false;
  private registration: { dispose(): void } | undefined;

  constructor(
    private readonly client: RequestHandlerRegistry,
    private readonly offer: () => boolean,
    private readonly handler: SummarizeHandler,
  ) {}

  /** Whether the last `initialize` declared the capability. */
  get isDeclared(): boolean {
    return this.declared;
  }

  fillClientCapabilities(capabilities: ClientCapabilities): void {
    this.declared = this.offer();
    if (this.declared) {
      declareSummarize(capabilities);
    }
  }

  initialize(): void {
    this.registration?.dispose();
    this.registration = this.declared ? this.client.onRequest(DS4_SUMMARIZE, this.handler) : undefined;
  }

  getState(): { kind: 'static' } {
    return { kind: 'static' };
  }

  clear(): void {
    this.registration?.dispose();
    this.registration = undefined;
  }
}

/**
 * The `ds4/summarize` handler: checks the params, picks a chat model (of the configured
 * family, preferring one whose input limit fits the prompt), sends the prompt, and returns
 * the collected text with the model's vendor and id. Rejects with a `ResponseError`:
 * InvalidParams for params not of the documented shape, RequestCancelled when the server
 * cancelled, RequestFailed with a message naming the cause otherwise.
 */
export function createSummarizeHandler(options: SummarizeOptions): SummarizeHandler {
  return async (params, token) => {
    const problems = checkSummarizeParams(params);
    if (problems.length > 0) {
      throw new ResponseError(ErrorCodes.InvalidParams, `${DS4_SUMMARIZE}: invalid params (${problems.join(', ')})`);
    }
    const call = params as SummarizeParams;
    const started = Date.now();
    const what = `${DS4_SUMMARIZE}: session ${call.sessionId}, ${String(call.sourceEntryIds.length)} entries, prompt ${String(call.prompt.length)} chars`;
    try {
      throwIfCancelled(token);
      const model = await chooseModel(options, call);
      throwIfCancelled(token);
      const response = await model.sendRequest(
        [options.lm.userMessage(call.prompt)],
        { justification: CONSENT_JUSTIFICATION },
        token,
      );
      const parts: string[] = [];
      for await (const part of response.text) {
        throwIfCancelled(token);
        parts.push(part);
      }
      throwIfCancelled(token);
      const summary = unwrapFence(parts.join('')).trim();
      if (summary === '') {
        throw failed(`the model ${describeModel(model)} returned an empty summary`);
      }
      options.log.info(
        `${what}: model ${describeModel(model)} wrote ${String(summary.length)} chars in ${String(Date.now() - started)} ms`,
      );
      return { summary, provider: model.vendor, model: model.id };
    } catch (error) {
      const answer = asResponseError(error, token);
      options.log.warn(`${what}: answered error ${String(answer.code)} after ${String(Date.now() - started)} ms: ${answer.message}`);
      throw answer;
    }
  };
}

async function chooseModel(options: SummarizeOptions, call: SummarizeParams): Promise<SummaryModel> {
  const family = options.modelFamily()?.trim() ?? '';
  let models: readonly SummaryModel[];
  try {
    models = await options.lm.selectChatModels(family === '' ? {} : { family });
  } catch (error) {
    throw failed(`selecting a chat model failed: ${errorText(error)}`);
  }
  const first = models[0];
  if (first === undefined) {
    throw failed(
      family === ''
        ? 'no chat model is available in VS Code (install or sign in to a model provider, e.g. GitHub Copilot)'
        : `no chat model of family "${family}" is available in VS Code (setting ds4.compaction.modelFamily)`,
    );
  }
  // chars-v1 (4 characters a token) plus the summary's room; the first model that fits.
  const needed = Math.ceil(call.prompt.length / 4) + call.tokenLimit;
  return models.find((model) => !(model.maxInputTokens > 0) || model.maxInputTokens >= needed) ?? first;
}

/**
 * A summary wrapped as a whole in one Markdown code fence (```` ```markdown ... ``` ````) is
 * unwrapped: models do that, and the contract parser would read a fenced block as code.
 */
export function unwrapFence(text: string): string {
  const match = /^\s*(`{3,}|~{3,})[\w-]*[ \t]*\r?\n([\s\S]*?)\r?\n[ \t]*\1[ \t]*\s*$/.exec(text);
  return match ? (match[2] ?? '') : text;
}

function describeModel(model: SummaryModel): string {
  return `${model.vendor}/${model.id}`;
}

function throwIfCancelled(token: CancellationToken): void {
  if (token.isCancellationRequested) {
    throw cancelled();
  }
}

function cancelled(): ResponseError {
  return new ResponseError(LSPErrorCodes.RequestCancelled, `${DS4_SUMMARIZE} was cancelled by the server`);
}

function failed(message: string): ResponseError {
  return new ResponseError(LSPErrorCodes.RequestFailed, message);
}

/** Any failure as the JSON-RPC error to answer with. */
function asResponseError(error: unknown, token: CancellationToken): ResponseError {
  if (error instanceof ResponseError) {
    return error as ResponseError; // thrown by this module: ResponseError<void>
  }
  if (token.isCancellationRequested) {
    return cancelled();
  }
  // vscode.LanguageModelError: `code` is the name of the static constructor.
  const code = isRecord(error) && typeof error.code === 'string' ? error.code : undefined;
  switch (code) {
    case 'NoPermissions':
      return failed('the user has not allowed DS4 to use the language model (consent declined)');
    case 'Blocked':
      return failed(`the language model refused the request (blocked, e.g. a quota or rate limit): ${errorText(error)}`);
    case 'NotFound':
      return failed(`the language model is no longer available: ${errorText(error)}`);
    default:
      return failed(`the language model failed: ${errorText(error)}`);
  }
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
