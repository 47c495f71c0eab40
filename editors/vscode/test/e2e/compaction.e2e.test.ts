/**
 * Compaction end to end against the real `ds4-lsp` over stdio: a client that declares
 * `experimental.ds4.summarize` with the extension's own `SummarizeFeature` and answers
 * `ds4/summarize` with the extension's own handler (`createSummarizeHandler`) over a fake
 * `vscode.lm` whose one chat model the test steers. It compacts a synthetic Pi v3 session
 * written by the test, appends the compaction entry as Pi would, reports it, and reads the
 * summary graph back, with the extension's `Ds4Requests`.
 *
 * Cases: the model's summary follows the contract and becomes the segment; an answer that
 * breaks the contract, no chat model, and a model slower than
 * `compaction.summarizeTimeoutMs` (cancelled by the server) each fall back to the offline
 * summarizer with a `fallbackReason`; `ds4/compactCommitted` / `ds4/compactFailed` and
 * `ds4.summaries` (tree and DOT).
 *
 * The server is `$DS4_LSP_COMMAND`, default `../../.venv/bin/ds4-lsp` from editors/vscode.
 */

import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';

import {
  type CancellationToken,
  type ClientCapabilities,
  createProtocolConnection,
  ExitNotification,
  InitializedNotification,
  InitializeRequest,
  type ProtocolConnection,
  ShutdownRequest,
  StreamMessageReader,
  StreamMessageWriter,
  WorkDoneProgressCreateRequest,
} from 'vscode-languageserver-protocol/node';

import { renderCompactResult, renderSummaries } from '../../src/compactionView';
import type { CompactResult, SummariesResult } from '../../src/protocol';
import { Ds4Requests } from '../../src/requests';
import { buildInitializationOptions, resolveServerLaunch } from '../../src/settings';
import { createSummarizeHandler, SummarizeFeature, type SummaryModel } from '../../src/summarize';
import { contractSummary, knownFiles, reader } from '../fixtures';
import { SessionWriter } from '../sessionWriter';

const PACKAGE_ROOT = resolve(__dirname, '..', '..', '..');
const REPO_ROOT = resolve(PACKAGE_ROOT, '..', '..');
const SERVER_COMMAND = process.env.DS4_LSP_COMMAND ?? join(REPO_ROOT, '.venv', 'bin', 'ds4-lsp');
const REQUEST_TIMEOUT_MS = 30_000;
const SUMMARIZE_TIMEOUT_MS = 1500;

/** What the test's chat model does with the next request. */
type Behaviour = 'contract' | 'prose' | 'no-model' | 'hang';

describe('compaction end to end: ds4/summarize answered by the extension’s handler', { timeout: 120_000 }, () => {
  let workDir: string;
  let session: SessionWriter;
  let server: ChildProcessWithoutNullStreams;
  let connection: ProtocolConnection;
  let requests: Ds4Requests;
  let feature: SummarizeFeature;
  let stderr = '';
  let behaviour: Behaviour = 'contract';
  /** What the model received and answered, per request. */
  const modelCalls: { prompt: string; answer?: string; cancelled: boolean }[] = [];
  const summarizeLog: string[] = [];

  const model: SummaryModel = {
    id: 'fake-summarizer-1',
    vendor: 'e2e',
    family: 'fake',
    name: 'Fake Summarizer',
    maxInputTokens: 200_000,
    sendRequest(messages: unknown[], _options, token: CancellationToken) {
      const prompt = (messages[0] as { content: string }).content;
      const call: (typeof modelCalls)[number] = { prompt, cancelled: false };
      modelCalls.push(call);
      async function* text(): AsyncIterable<string> {
        if (behaviour === 'hang') {
          // Nothing until the server gives up and cancels (as a real stream ends then).
          await new Promise<void>((resolveCancel) => token.onCancellationRequested(() => { resolveCancel(); }));
          call.cancelled = true;
          return;
        }
        const answer = behaviour === 'prose' ? 'Sure! The agent fixed the parser and the tests pass now.' : contractSummary(prompt);
        call.answer = answer;
        for (let at = 0; at < answer.length; at += 64) {
          await Promise.resolve();
          yield answer.slice(at, at + 64);
        }
      }
      return Promise.resolve({ text: text() });
    },
  };

  before(async () => {
    assert.ok(existsSync(SERVER_COMMAND), `ds4-lsp not found at ${SERVER_COMMAND}: set DS4_LSP_COMMAND`);
    workDir = mkdtempSync(join(tmpdir(), 'ds4-vscode-compaction-'));
    const projectDir = join(workDir, 'project');
    mkdirSync(projectDir);
    mkdirSync(join(workDir, 'sessions'));
    session = new SessionWriter(join(workDir, 'sessions', 'session.jsonl'));
    for (const n of [1, 2, 3]) {
      session.turn(n);
    }

    // Keep only ~200 recent tokens, so three turns make a span; give the model 1.5 s.
    const settings = reader({
      'server.command': SERVER_COMMAND,
      'server.args': ['--log-level', 'warning'],
      'compaction.keepRecentTokens': 200,
      'compaction.summarizeTimeoutMs': SUMMARIZE_TIMEOUT_MS,
    });
    const launch = resolveServerLaunch(settings, { homeDir: workDir, workspaceFolder: projectDir });
    server = spawn(launch.command, launch.args, {
      cwd: projectDir,
      env: { ...process.env, DS4_DB: join(workDir, 'db', 'context.db') },
    });
    server.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    connection = createProtocolConnection(new StreamMessageReader(server.stdout), new StreamMessageWriter(server.stdin));
    connection.onRequest(WorkDoneProgressCreateRequest.type, () => undefined);
    // The extension's feature, with the connection in place of the LanguageClient.
    feature = new SummarizeFeature(
      connection,
      () => true,
      createSummarizeHandler({
        lm: {
          selectChatModels: () => Promise.resolve(behaviour === 'no-model' ? [] : [model]),
          userMessage: (text) => ({ role: 'user', content: text }),
        },
        modelFamily: () => undefined,
        log: { info: (line) => summarizeLog.push(line), warn: (line) => summarizeLog.push(line) },
      }),
    );
    connection.listen();

    const capabilities: ClientCapabilities = { window: { workDoneProgress: true }, workspace: { configuration: true } };
    feature.fillClientCapabilities(capabilities);
    assert.deepEqual(capabilities.experimental, { ds4: { summarize: true } });
    await withTimeout(
      connection.sendRequest(InitializeRequest.type, {
        processId: process.pid,
        // eslint-disable-next-line @typescript-eslint/no-deprecated -- a required field; VS Code still sends it
        rootUri: pathToFileURL(projectDir).href,
        workspaceFolders: [{ uri: pathToFileURL(projectDir).href, name: 'e2e' }],
        capabilities,
        initializationOptions: buildInitializationOptions(false, settings, { homeDir: workDir, workspaceFolder: projectDir }),
      }),
      'initialize',
    );
    feature.initialize();
    await connection.sendNotification(InitializedNotification.type, {});
    requests = new Ds4Requests(connection);
  });

  after(async () => {
    if (/Traceback| ERROR /.test(stderr)) {
      process.stderr.write(`--- ds4-lsp stderr ---\n${stderr}\n`);
    }
    try {
      await withTimeout(connection.sendRequest(ShutdownRequest.type), 'shutdown');
      await connection.sendNotification(ExitNotification.type);
    } catch {
      // The assertions have run; the process is killed below.
    }
    feature.clear();
    connection.dispose();
    if (server.exitCode === null) {
      server.kill();
    }
    rmSync(workDir, { recursive: true, force: true });
  });

  let first: CompactResult;

  it('uses the editor model’s summary when it follows the contract', async () => {
    behaviour = 'contract';
    const calls = modelCalls.length;
    first = await withTimeout(requests.compact({ session: { file: session.path, leafId: session.leaf ?? '' }, reason: 'manual' }), 'ds4/compact');

    assert.equal(modelCalls.length, calls + 1, 'the server asked the client once');
    const call = modelCalls.at(-1);
    assert.ok(call?.answer);
    assert.ok(call.prompt.includes('Step 1: fix the parser bug'), 'the prompt carries the conversation');
    // Pi's inventories: an edited file counts as modified, not read.
    assert.ok(knownFiles(call.prompt).modifiedFiles.includes('src/parser_1.py'), JSON.stringify(knownFiles(call.prompt)));
    assert.equal(first.summarizer, 'client');
    assert.equal(first.fallbackReason, null);
    assert.equal(first.validation.status, 'valid', JSON.stringify(first.validation));
    assert.equal(first.summaryKind, 'segment');
    assert.equal(first.graphLevel, 0);
    assert.equal(first.summaryId, first.segmentSummaryId);
    assert.match(first.summaryId, /^s-[0-9a-f]{16}$/);
    assert.equal(first.compaction.summary.trim(), call.answer.trim());
    const record = first.compaction.details.ds4ContextEngine as Record<string, unknown>;
    assert.equal(record.provider, 'e2e');
    assert.equal(record.model, 'fake-summarizer-1');
    assert.equal(first.span.previousSummaryId, null);
    assert.ok(first.span.messageCount > 0 && first.compaction.firstKeptEntryId !== null);
    // The handler logged ids and sizes, never text.
    assert.match(summarizeLog.at(-1) ?? '', /^ds4\/summarize: session 0a1b2c3d-e2e-sess, \d+ entries, prompt \d+ chars: model e2e\/fake-summarizer-1 wrote \d+ chars/);

    const view = renderCompactResult(first, { sessionFile: session.path });
    assert.ok(view.includes('| Summarizer | client (e2e/fake\\-summarizer\\-1) |'));
    assert.ok(view.includes('ds4 has not written anything to the session file'));
  });

  it('shows the committed segment as the active root once Pi appended the entry', async () => {
    const entryId = session.compaction(first);
    await requests.compactCommitted(first.summaryId, entryId);
    const graph = await waitForGraph(requests, session.path, (view) =>
      view.nodes.some((node) => node.summaryId === first.summaryId && node.lifecycle === 'committed'),
    );
    assert.equal(graph.activeRootId, first.summaryId);
    assert.equal(graph.sessionId, session.sessionId);
    const node = graph.nodes.find((candidate) => candidate.summaryId === first.summaryId);
    assert.equal(node?.role, 'active-root');
    assert.equal(node.piEntryId, entryId);
    assert.match(graph.tree, new RegExp(`\\* ${first.summaryId} segment L0 committed valid \\d+ tok \\(active root\\)`));
    assert.match(graph.dot ?? '', /^digraph summaries \{/);
    assert.ok(renderSummaries(graph).includes(`active root: ${first.summaryId}`));
  });

  let second: CompactResult;

  it('falls back to the offline summary when the model’s answer breaks the contract', async () => {
    session.turn(4);
    session.turn(5);
    behaviour = 'prose';
    second = await withTimeout(requests.compact({ session: { file: session.path }, reason: 'threshold' }), 'ds4/compact');
    assert.equal(modelCalls.at(-1)?.answer, 'Sure! The agent fixed the parser and the tests pass now.');
    assert.equal(second.summarizer, 'offline');
    assert.ok(second.fallbackReason && second.fallbackReason.length > 0, 'a fallback reason');
    assert.notEqual(second.validation.status, 'invalid');
    assert.ok(second.validation.issueCodes.includes('missing-section'), JSON.stringify(second.validation));
    // The branch had a root: the new root aggregates it with the new segment.
    assert.equal(second.span.previousSummaryId, first.summaryId);
    assert.equal(second.summaryKind, 'aggregate');
    assert.equal(second.graphLevel, 1);
    assert.notEqual(second.summaryId, second.segmentSummaryId);
    const record = second.compaction.details.ds4ContextEngine as Record<string, unknown>;
    assert.deepEqual(record.childSummaryIds, [first.summaryId, second.segmentSummaryId]);
  });

  it('marks a compaction the agent did not append as failed', async () => {
    await requests.compactFailed(second.summaryId, 'e2e: not appended');
    const graph = await waitForGraph(requests, session.path, (view) =>
      view.nodes.some((node) => node.summaryId === second.summaryId && node.lifecycle === 'failed'),
    );
    assert.equal(graph.activeRootId, first.summaryId, 'the committed root stays active');
    assert.equal(graph.nodes.find((node) => node.summaryId === second.segmentSummaryId)?.lifecycle, 'failed');
  });

  it('falls back to the offline summary when no chat model is available', async () => {
    behaviour = 'no-model';
    const calls = modelCalls.length;
    const result = await withTimeout(requests.compact({ session: { file: session.path }, reason: 'manual' }), 'ds4/compact');
    assert.equal(modelCalls.length, calls, 'no model was asked');
    assert.equal(result.summarizer, 'offline');
    assert.match(result.fallbackReason ?? '', /-32803.*no chat model is available in VS Code/);
    await requests.compactFailed(result.summaryId);
  });

  it('falls back when the model is slower than compaction.summarizeTimeoutMs, and the model is cancelled', async () => {
    behaviour = 'hang';
    const started = Date.now();
    const result = await withTimeout(requests.compact({ session: { file: session.path }, reason: 'overflow' }), 'ds4/compact');
    assert.ok(Date.now() - started >= SUMMARIZE_TIMEOUT_MS - 100, `${String(Date.now() - started)} ms`);
    assert.equal(result.summarizer, 'offline');
    assert.match(result.fallbackReason ?? '', new RegExp(`did not answer ds4/summarize within ${String(SUMMARIZE_TIMEOUT_MS)} ms`));
    const call = modelCalls.at(-1);
    await waitFor(() => call?.cancelled === true);
    await waitFor(() => (summarizeLog.at(-1) ?? '').includes('answered error -32800'));
    await requests.compactFailed(result.summaryId);
  });
});

/** `ds4.summaries` (with DOT) until `done(view)`, polling: notifications are handled asynchronously. */
async function waitForGraph(
  requests: Ds4Requests,
  file: string,
  done: (view: SummariesResult) => boolean,
): Promise<SummariesResult> {
  const deadline = Date.now() + REQUEST_TIMEOUT_MS;
  for (;;) {
    const view = await withTimeout(requests.summaries({ session: { file }, format: 'dot' }), 'ds4.summaries');
    if (done(view) || Date.now() > deadline) {
      return view;
    }
    await new Promise((resolveSoon) => setTimeout(resolveSoon, 50));
  }
}

async function waitFor(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + REQUEST_TIMEOUT_MS;
  while (!condition()) {
    assert.ok(Date.now() < deadline, 'timed out');
    await new Promise((resolveSoon) => setTimeout(resolveSoon, 20));
  }
}

function withTimeout<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`${what}: no answer within ${String(REQUEST_TIMEOUT_MS)} ms`));
    }, REQUEST_TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => {
    clearTimeout(timer);
  });
}
