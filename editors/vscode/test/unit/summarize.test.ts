import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  CancellationToken,
  CancellationTokenSource,
  type ClientCapabilities,
  ErrorCodes,
  LSPErrorCodes,
  ResponseError,
} from 'vscode-languageserver-protocol';

import { DS4_SUMMARIZE, type SummarizeParams } from '../../src/protocol';
import {
  CONSENT_JUSTIFICATION,
  createSummarizeHandler,
  declareSummarize,
  offersSummarize,
  SummarizeFeature,
  type SummaryModel,
  unwrapFence,
} from '../../src/summarize';
import { reader, summarizeParams, summaryText } from '../fixtures';

interface SentRequest {
  messages: unknown[];
  options: { justification?: string };
  token: CancellationToken;
}

/** A chat model that streams `chunks` (or runs `stream` for each request) and records the requests. */
function fakeModel(
  chunks: string[],
  overrides: Partial<Pick<SummaryModel, 'id' | 'vendor' | 'family' | 'maxInputTokens'>> = {},
  stream?: (token: CancellationToken) => AsyncIterable<string>,
): SummaryModel & { sent: SentRequest[] } {
  const sent: SentRequest[] = [];
  return {
    id: 'gpt-4o',
    vendor: 'copilot',
    family: 'gpt-4o',
    name: 'GPT-4o',
    maxInputTokens: 128000,
    ...overrides,
    sent,
    sendRequest(messages, options, token) {
      sent.push({ messages, options, token });
      async function* text(): AsyncIterable<string> {
        for (const chunk of chunks) {
          await Promise.resolve();
          yield chunk;
        }
      }
      return Promise.resolve({ text: stream ? stream(token) : text() });
    },
  };
}

/** `vscode.lm` with `models` (by family; `*` for every family), recording the selectors. */
function fakeLm(models: Record<string, SummaryModel[]>) {
  const selectors: { family?: string }[] = [];
  return {
    selectors,
    lm: {
      selectChatModels(selector: { family?: string }) {
        selectors.push(selector);
        const family = selector.family;
        return Promise.resolve(family === undefined ? Object.values(models).flat() : (models[family] ?? []));
      },
      userMessage: (text: string) => ({ role: 'user', text }),
    },
  };
}

function recordingLog() {
  const lines: string[] = [];
  return { lines, log: { info: (line: string) => lines.push(`info ${line}`), warn: (line: string) => lines.push(`warn ${line}`) } };
}

async function rejection(promise: Promise<unknown>): Promise<ResponseError<unknown>> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ResponseError, `expected a ResponseError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected a rejection');
}

describe('ds4/summarize handler (editor chat model)', () => {
  it('sends the prompt as one user message and returns the streamed text with the model’s vendor and id', async () => {
    const summary = summaryText({ Objective: ['Fix the parser bugs.'] });
    const model = fakeModel([summary.slice(0, 40), summary.slice(40, 200), summary.slice(200)]);
    const { lm, selectors } = fakeLm({ 'gpt-4o': [model] });
    const { lines, log } = recordingLog();
    const handler = createSummarizeHandler({ lm, modelFamily: () => undefined, log });
    const params = summarizeParams();
    const result = await handler(params, CancellationToken.None);

    assert.deepEqual(result, { summary: summary.trim(), provider: 'copilot', model: 'gpt-4o' });
    assert.deepEqual(selectors, [{}], 'no family set: any model');
    const request = model.sent[0];
    assert.ok(request && model.sent.length === 1);
    assert.deepEqual(request.messages, [{ role: 'user', text: params.prompt }]);
    assert.equal(request.options.justification, CONSENT_JUSTIFICATION);
    assert.equal(request.token, CancellationToken.None, 'the server’s cancellation reaches the model');
    // Ids and sizes only: never the prompt or the summary.
    assert.equal(lines.length, 1);
    assert.match(lines[0] ?? '', /^info ds4\/summarize: session 0a1b2c3d-sess, 2 entries, prompt \d+ chars: model copilot\/gpt-4o wrote \d+ chars in \d+ ms$/);
    assert.ok(!lines.some((line) => line.includes('parser') || line.includes('Objective')));
  });

  it('asks for the configured family and prefers a model whose input limit fits the prompt', async () => {
    const small = fakeModel(['## Objective\n- x'], { id: 'small', maxInputTokens: 100 });
    const large = fakeModel(['## Objective\n- y'], { id: 'large', maxInputTokens: 200000 });
    const { lm, selectors } = fakeLm({ claude: [small, large] });
    const handler = createSummarizeHandler({ lm, modelFamily: () => ' claude ', log: recordingLog().log });
    const result = await handler(summarizeParams({ prompt: 'p'.repeat(4000) }), CancellationToken.None);
    assert.deepEqual(selectors, [{ family: 'claude' }]);
    assert.equal(result.model, 'large');
    assert.equal(small.sent.length, 0);
  });

  it('unwraps a summary the model put in one code fence', async () => {
    const summary = summaryText();
    const model = fakeModel(['```markdown\n', summary, '```\n']);
    const handler = createSummarizeHandler({ lm: fakeLm({ f: [model] }).lm, modelFamily: () => undefined, log: recordingLog().log });
    assert.equal((await handler(summarizeParams(), CancellationToken.None)).summary, summary.trim());
    assert.equal(unwrapFence('~~~\n## A\n- b\n~~~'), '## A\n- b');
    assert.equal(unwrapFence('## A\n```sh\nx\n```\n'), '## A\n```sh\nx\n```\n', 'an inner fence stays');
  });

  it('answers RequestFailed naming the cause when no model is available', async () => {
    const { lines, log } = recordingLog();
    const none = createSummarizeHandler({ lm: fakeLm({}).lm, modelFamily: () => '', log });
    const error = await rejection(none(summarizeParams(), CancellationToken.None));
    assert.equal(error.code, LSPErrorCodes.RequestFailed);
    assert.match(error.message, /no chat model is available in VS Code/);
    assert.match(lines[0] ?? '', /^warn ds4\/summarize: session 0a1b2c3d-sess, 2 entries, prompt \d+ chars: answered error -32803 after \d+ ms: no chat model/);

    const family = createSummarizeHandler({ lm: fakeLm({ other: [fakeModel(['x'])] }).lm, modelFamily: () => 'gpt-5', log });
    const familyError = await rejection(family(summarizeParams(), CancellationToken.None));
    assert.match(familyError.message, /no chat model of family "gpt-5".*ds4\.compaction\.modelFamily/);
  });

  it('answers RequestFailed when the user declines consent, the model is blocked or fails, or the summary is empty', async () => {
    const failing = (error: Error): SummaryModel => ({
      ...fakeModel([]),
      sendRequest: () => Promise.reject(error),
    });
    const cases: [Error, RegExp][] = [
      [Object.assign(new Error('denied'), { code: 'NoPermissions' }), /has not allowed DS4 to use the language model \(consent declined\)/],
      [Object.assign(new Error('quota exceeded'), { code: 'Blocked' }), /refused the request \(blocked.*quota exceeded/],
      [Object.assign(new Error('gone'), { code: 'NotFound' }), /no longer available: gone/],
      [new Error('socket hang up'), /the language model failed: socket hang up/],
    ];
    for (const [thrown, expected] of cases) {
      const handler = createSummarizeHandler({ lm: fakeLm({ f: [failing(thrown)] }).lm, modelFamily: () => undefined, log: recordingLog().log });
      const error = await rejection(handler(summarizeParams(), CancellationToken.None));
      assert.equal(error.code, LSPErrorCodes.RequestFailed);
      assert.match(error.message, expected);
    }
    const empty = createSummarizeHandler({ lm: fakeLm({ f: [fakeModel(['  ', '\n'])] }).lm, modelFamily: () => undefined, log: recordingLog().log });
    assert.match((await rejection(empty(summarizeParams(), CancellationToken.None))).message, /returned an empty summary/);
  });

  it('stops reading and answers RequestCancelled when the server cancels', async () => {
    const source = new CancellationTokenSource();
    let chunksRead = 0;
    const model = fakeModel([], {}, (token) => ({
      async *[Symbol.asyncIterator]() {
        for (;;) {
          chunksRead += 1;
          if (chunksRead === 3) {
            source.cancel(); // what vscode-jsonrpc does on $/cancelRequest
          }
          await new Promise((resolve) => setTimeout(resolve, 1));
          if (token.isCancellationRequested) {
            return; // a model stream ends when its token is cancelled
          }
          yield '## Objective\n- more\n';
        }
      },
    }));
    const { lines, log } = recordingLog();
    const handler = createSummarizeHandler({ lm: fakeLm({ f: [model] }).lm, modelFamily: () => undefined, log });
    const error = await rejection(handler(summarizeParams(), source.token));
    assert.equal(error.code, LSPErrorCodes.RequestCancelled);
    assert.equal(model.sent[0]?.token, source.token);
    assert.equal(chunksRead, 3);
    assert.match(lines[0] ?? '', /answered error -32800/);

    // Cancelled before a model was even asked.
    const early = new CancellationTokenSource();
    early.cancel();
    const unused = fakeModel(['x']);
    const handler2 = createSummarizeHandler({ lm: fakeLm({ f: [unused] }).lm, modelFamily: () => undefined, log });
    assert.equal((await rejection(handler2(summarizeParams(), early.token))).code, LSPErrorCodes.RequestCancelled);
    assert.equal(unused.sent.length, 0);
  });

  it('refuses params not of the documented shape with InvalidParams', async () => {
    const model = fakeModel(['x']);
    const handler = createSummarizeHandler({ lm: fakeLm({ f: [model] }).lm, modelFamily: () => undefined, log: recordingLog().log });
    const bad = { ...summarizeParams(), prompt: 42 } as unknown as SummarizeParams;
    const error = await rejection(handler(bad, CancellationToken.None));
    assert.equal(error.code, ErrorCodes.InvalidParams);
    assert.match(error.message, /params\.prompt/);
    assert.equal(model.sent.length, 0);
  });
});

describe('ds4/summarize capability', () => {
  it('is offered when ds4.compaction.useEditorModel is on (the default) and vscode.lm exists', () => {
    assert.equal(offersSummarize(reader({}), true), true);
    assert.equal(offersSummarize(reader({ 'compaction.useEditorModel': true }), true), true);
    assert.equal(offersSummarize(reader({ 'compaction.useEditorModel': false }), true), false);
    assert.equal(offersSummarize(reader({}), false), false, 'no language model API');
  });

  it('declares experimental.ds4.summarize, keeping other experimental capabilities', () => {
    const capabilities: ClientCapabilities = { experimental: { other: 1, ds4: { future: true } } };
    declareSummarize(capabilities);
    assert.deepEqual(capabilities.experimental, { other: 1, ds4: { future: true, summarize: true } });
    const empty: ClientCapabilities = {};
    declareSummarize(empty);
    assert.deepEqual(empty.experimental, { ds4: { summarize: true } });
  });

  it('the static feature declares and registers the handler only when offered, at each start', async () => {
    const registered: string[] = [];
    let disposed = 0;
    let offer = true;
    const handler = () => Promise.resolve({ summary: 'x' });
    const feature = new SummarizeFeature(
      {
        onRequest(method, registeredHandler) {
          registered.push(method);
          assert.equal(registeredHandler, handler);
          return { dispose: () => (disposed += 1) };
        },
      },
      () => offer,
      handler,
    );
    assert.deepEqual(feature.getState(), { kind: 'static' });

    const on: ClientCapabilities = {};
    feature.fillClientCapabilities(on);
    feature.initialize();
    assert.deepEqual(on.experimental, { ds4: { summarize: true } });
    assert.equal(feature.isDeclared, true);
    assert.deepEqual(registered, [DS4_SUMMARIZE]);
    feature.clear();
    assert.equal(disposed, 1);

    // Restarted with the setting off: nothing declared, no handler.
    offer = false;
    const off: ClientCapabilities = {};
    feature.fillClientCapabilities(off);
    feature.initialize();
    assert.equal(off.experimental, undefined);
    assert.equal(feature.isDeclared, false);
    assert.deepEqual(registered, [DS4_SUMMARIZE]);
    feature.clear();
    assert.equal(disposed, 1);
    assert.deepEqual(await handler(), { summary: 'x' });
  });
});
