import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { Ds4ContractError, type Ds4Connection, Ds4Requests, type WorkDoneProgressValue } from '../../src/requests';
import { compactResult, healthResult, planResult, privacyAnswer, summariesResult } from '../fixtures';

/** A connection that answers from `answers` and plays `progress` on the request's token. */
function fakeConnection(answers: Record<string, unknown>, progress: WorkDoneProgressValue[] = []) {
  const sent: { method: string; param: unknown }[] = [];
  const notified: { method: string; params: unknown }[] = [];
  const listeners = new Map<string | number, (value: unknown) => void>();
  let disposed = 0;
  const connection: Ds4Connection = {
    sendRequest<R>(method: string, param: unknown): Promise<R> {
      sent.push({ method, param });
      const token = (param as { workDoneToken?: string }).workDoneToken;
      const listener = token === undefined ? undefined : listeners.get(token);
      for (const value of progress) {
        listener?.(value);
      }
      const key = method === 'workspace/executeCommand' ? (param as { command: string }).command : method;
      return Promise.resolve(answers[key] as R);
    },
    sendNotification(method: string, params: unknown): Promise<void> {
      notified.push({ method, params });
      return Promise.resolve();
    },
    onProgress(_type, token, handler) {
      listeners.set(token, handler as (value: unknown) => void);
      return {
        dispose: () => {
          disposed += 1;
          listeners.delete(token);
        },
      };
    },
  };
  return { connection, sent, notified, disposedCount: () => disposed };
}

describe('ds4 requests', () => {
  it('asks ds4.privacy about a destination, passing { model } as the one argument', async () => {
    const { connection, sent } = fakeConnection({ 'ds4.privacy': privacyAnswer() });
    const answer = await new Ds4Requests(connection).privacy({ model: 'openai/gpt-4o' });
    assert.equal(answer.kind, 'remote');
    const param = sent[0]?.param as { command: string; arguments: unknown[] };
    assert.equal(param.command, 'ds4.privacy');
    assert.deepEqual(param.arguments, [{ model: 'openai/gpt-4o' }]);
    const bad = fakeConnection({ 'ds4.privacy': { ...privacyAnswer(), explanation: 5 } });
    await assert.rejects(new Ds4Requests(bad.connection).privacy({ model: 'openai/gpt-4o' }), Ds4ContractError);
  });

  it('sends ds4/plan params unchanged and returns the checked result', async () => {
    const { connection, sent } = fakeConnection({ 'ds4/plan': planResult() });
    const params = { session: { file: '/s.jsonl' }, request: 'next', fixedTokens: 10 };
    const result = await new Ds4Requests(connection).plan(params);
    assert.equal(result.manifestId, 'm-01a22bfe7ae5956d3018a646656d');
    assert.deepEqual(sent, [{ method: 'ds4/plan', param: params }]);
  });

  it('runs commands with no arguments and its own progress token, and stops listening after', async () => {
    const progress: WorkDoneProgressValue[] = [
      { kind: 'begin', title: 'ds4: checking health', percentage: 0 },
      { kind: 'end', message: 'status ok' },
    ];
    const { connection, sent, disposedCount } = fakeConnection({ 'ds4.health': healthResult() }, progress);
    const seen: WorkDoneProgressValue[] = [];
    await new Ds4Requests(connection).health((value) => seen.push(value));
    assert.deepEqual(seen, progress);
    const param = sent[0]?.param as { command: string; arguments: unknown[]; workDoneToken: string };
    assert.equal(sent[0]?.method, 'workspace/executeCommand');
    assert.equal(param.command, 'ds4.health');
    assert.deepEqual(param.arguments, []);
    assert.match(param.workDoneToken, /^ds4-client-\d+-\d+$/);
    assert.equal(disposedCount(), 1);
  });

  it('uses a fresh token for each command', async () => {
    const { connection, sent } = fakeConnection({ 'ds4.health': healthResult() });
    const requests = new Ds4Requests(connection);
    await requests.health(() => undefined);
    await requests.health(() => undefined);
    const tokens = sent.map((request) => (request.param as { workDoneToken: string }).workDoneToken);
    assert.notEqual(tokens[0], tokens[1]);
  });

  it('reports an agent tool run as a ds4/toolExecuted notification', async () => {
    const { connection, sent, notified } = fakeConnection({});
    await new Ds4Requests(connection).toolExecuted({ tool: 'edit', paths: ['src/shipping.py'] });
    assert.deepEqual(notified, [{ method: 'ds4/toolExecuted', params: { tool: 'edit', paths: ['src/shipping.py'] } }]);
    assert.deepEqual(sent, []);
  });

  it('rejects an answer of the wrong shape, naming the fields (version skew)', async () => {
    const { connection } = fakeConnection({ 'ds4/plan': { ...planResult(), estimatedTokens: '36349', manifestId: undefined } });
    await assert.rejects(new Ds4Requests(connection).plan({}), (error: unknown) => {
      assert.ok(error instanceof Ds4ContractError);
      assert.deepEqual(error.fields, ['result.manifestId', 'result.estimatedTokens']);
      assert.match(error.message, /ds4\/plan: .*same version/);
      return true;
    });
  });

  it('sends ds4/compact params unchanged and checks the result', async () => {
    const { connection, sent } = fakeConnection({ 'ds4/compact': compactResult() });
    const params = { session: { file: '/s.jsonl', leafId: '00000020' }, reason: 'manual' as const, customInstructions: 'the parser' };
    const result = await new Ds4Requests(connection).compact(params);
    assert.equal(result.summaryId, 's-00112233445566aa');
    assert.deepEqual(sent, [{ method: 'ds4/compact', param: params }]);
    const bad = fakeConnection({ 'ds4/compact': { ...compactResult(), summaryId: 7 } });
    await assert.rejects(new Ds4Requests(bad.connection).compact(params), /ds4\/compact: .*result\.summaryId/);
  });

  it('runs ds4.summaries with its one argument object and a progress token', async () => {
    const { connection, sent } = fakeConnection({ 'ds4.summaries': summariesResult({ dot: 'digraph summaries {\n}\n' }) });
    const result = await new Ds4Requests(connection).summaries({ session: { file: '/s.jsonl' }, format: 'dot' });
    assert.equal(result.dot, 'digraph summaries {\n}\n');
    const param = sent[0]?.param as { command: string; arguments: unknown[]; workDoneToken: string };
    assert.equal(param.command, 'ds4.summaries');
    assert.deepEqual(param.arguments, [{ session: { file: '/s.jsonl' }, format: 'dot' }]);
    assert.match(param.workDoneToken, /^ds4-client-/);
  });

  it('reports a commit or a failure of the compaction entry as notifications', async () => {
    const { connection, notified } = fakeConnection({});
    const requests = new Ds4Requests(connection);
    await requests.compactCommitted('s-00112233445566aa', '00000021');
    await requests.compactCommitted('s-00112233445566aa');
    await requests.compactFailed('s-00112233445566bb', 'the user cancelled');
    await requests.compactFailed('s-00112233445566bb');
    assert.deepEqual(notified, [
      { method: 'ds4/compactCommitted', params: { summaryId: 's-00112233445566aa', entryId: '00000021' } },
      { method: 'ds4/compactCommitted', params: { summaryId: 's-00112233445566aa' } },
      { method: 'ds4/compactFailed', params: { summaryId: 's-00112233445566bb', reason: 'the user cancelled' } },
      { method: 'ds4/compactFailed', params: { summaryId: 's-00112233445566bb' } },
    ]);
  });
});
