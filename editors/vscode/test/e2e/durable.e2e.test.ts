/**
 * Durable context end to end against the real `ds4-lsp` over stdio, through the extension's
 * `Ds4Requests`, `OwnedSession` and memory views: `ds4/memory` lists the items a Pi session's
 * custom entries hold; `ds4/remember` / `ds4/pin` return the entry for Pi to append, and a
 * conflicting claim comes back as `RequestFailed` with the item to supersede;
 * `ds4/sessionOpen` / `ds4/sessionAppend` give the workspace a session the server writes;
 * `ds4/artifactSearch` finds text in a tool output a plan stored as an artifact.
 *
 * A request the server does not have yet (MethodNotFound) skips its case. The server is
 * `$DS4_LSP_COMMAND`, default `../../.venv/bin/ds4-lsp` from editors/vscode.
 */

import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it, type TestContext } from 'node:test';

import {
  createProtocolConnection,
  ErrorCodes,
  ExitNotification,
  InitializedNotification,
  InitializeRequest,
  type ProtocolConnection,
  ResponseError,
  ShutdownRequest,
  StreamMessageReader,
  StreamMessageWriter,
} from 'vscode-languageserver-protocol/node';

import { mutationEntryJson, refusedWrite, renderArtifactSearch, renderMemoryHtml } from '../../src/memoryView';
import { OWNED_SESSION_KEY, OwnedSession } from '../../src/ownedSession';
import { Ds4Requests } from '../../src/requests';
import { buildInitializationOptions, resolveServerLaunch } from '../../src/settings';
import { reader } from '../fixtures';
import { SessionWriter } from '../sessionWriter';

const PACKAGE_ROOT = resolve(__dirname, '..', '..', '..');
const REPO_ROOT = resolve(PACKAGE_ROOT, '..', '..');
const SERVER_COMMAND = process.env.DS4_LSP_COMMAND ?? join(REPO_ROOT, '.venv', 'bin', 'ds4-lsp');
const NONCE = 'abcdefghijklmnop0123456789';

/** Run `call`; skip the case when the server has no such request yet. */
async function orSkip<T>(t: TestContext, method: string, call: () => Promise<T>): Promise<T | undefined> {
  try {
    return await call();
  } catch (error: unknown) {
    if (error instanceof ResponseError && error.code === ErrorCodes.MethodNotFound) {
      t.skip(`this ds4-lsp has no ${method} yet`);
      return undefined;
    }
    throw error;
  }
}

describe('durable context end to end: memory, pins, owned sessions, artifacts', { timeout: 120_000 }, () => {
  let workDir: string;
  let projectDir: string;
  let memorySession: SessionWriter;
  let artifactSession: SessionWriter;
  let server: ChildProcessWithoutNullStreams;
  let connection: ProtocolConnection;
  let requests: Ds4Requests;
  let stderr = '';

  before(async () => {
    assert.ok(existsSync(SERVER_COMMAND), `ds4-lsp not found at ${SERVER_COMMAND}: set DS4_LSP_COMMAND`);
    workDir = mkdtempSync(join(tmpdir(), 'ds4-vscode-durable-'));
    projectDir = join(workDir, 'project');
    mkdirSync(projectDir);
    mkdirSync(join(workDir, 'sessions'));
    // A Pi session of the workspace with one memory item, as DS4's Pi extension writes it.
    memorySession = new SessionWriter(join(workDir, 'sessions', 'memory.jsonl'), 'vscode-memory-sess', projectDir);
    const source = memorySession.user('How many retries does the client make?');
    memorySession.append('custom', {
      customType: 'ds4-context-memory-v1',
      data: {
        schemaVersion: 1,
        mutationId: 'mu-vscode-1',
        createdAt: 1764666120000,
        operation: 'add',
        item: { id: 'mem-vscode-1', scope: 'project', projectPath: projectDir, claim: 'retries defaults to 3', createdAt: 1764666120000, sourceEntryIds: [source] },
      },
    });
    // A tool output over artifacts.maxInlineToolResultChars (12,000), with one rare word.
    artifactSession = new SessionWriter(join(workDir, 'sessions', 'artifact.jsonl'), 'vscode-artifact-sess', projectDir);
    artifactSession.user('Run the whole test suite.');
    artifactSession.assistant('Running.', [['b1', 'bash', { command: 'pytest -q' }]]);
    const log = Array.from({ length: 600 }, (_, n) => `tests/test_case_${String(n)}.py::test_${String(n)} PASSED\n`).join('');
    artifactSession.toolResult('b1', 'bash', `${log}E   ZebraRetryError: expected 3 retries, got 5\n${log}`);
    artifactSession.assistant('One failure: ZebraRetryError.');

    const settings = reader({ 'server.command': SERVER_COMMAND, 'server.args': ['--log-level', 'warning'] });
    const launch = resolveServerLaunch(settings, { homeDir: workDir, workspaceFolder: projectDir });
    server = spawn(launch.command, launch.args, { cwd: projectDir, env: { ...process.env, DS4_DB: join(workDir, 'db', 'context.db') } });
    server.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    connection = createProtocolConnection(new StreamMessageReader(server.stdout), new StreamMessageWriter(server.stdin));
    connection.listen();
    await connection.sendRequest(InitializeRequest.type, {
      processId: process.pid,
      // eslint-disable-next-line @typescript-eslint/no-deprecated -- a required field; VS Code still sends it
      rootUri: pathToFileURL(projectDir).href,
      workspaceFolders: [{ uri: pathToFileURL(projectDir).href, name: 'durable' }],
      capabilities: {},
      initializationOptions: buildInitializationOptions(true, settings, { homeDir: workDir, workspaceFolder: projectDir }),
    });
    await connection.sendNotification(InitializedNotification.type, {});
    requests = new Ds4Requests(connection);
  });

  after(async () => {
    if (stderr.includes('Traceback')) {
      process.stderr.write(`--- ds4-lsp stderr ---\n${stderr}\n`);
    }
    try {
      await connection.sendRequest(ShutdownRequest.type);
      await connection.sendNotification(ExitNotification.type);
    } catch {
      // Already gone.
    }
    connection.dispose();
    if (server.exitCode === null) {
      server.kill();
    }
    rmSync(workDir, { recursive: true, force: true });
  });

  it("lists a Pi session's memory with provenance, and the memory page shows it", async () => {
    const result = await requests.memory({ session: { file: memorySession.path }, includeInactive: true });
    assert.equal(result.sessionId, 'vscode-memory-sess');
    const item = result.memory.find((candidate) => candidate.id === 'mem-vscode-1');
    assert.ok(item, JSON.stringify(result));
    assert.equal(item.status, 'active');
    assert.equal(item.key, 'retries');
    assert.deepEqual(item.provenance.sourceEntryIds, ['00000001']);
    const html = renderMemoryHtml(result, { nonce: NONCE, sessionFile: memorySession.path });
    assert.match(html, /<p class="claim">retries defaults to 3<\/p>/);
    assert.match(html, /command:ds4\.client\.memoryAction/);
  });

  it('returns the entry for Pi to append, and a conflicting claim names the item to supersede', async (t) => {
    const session = { file: memorySession.path };
    const added = await orSkip(t, 'ds4/remember', () => requests.remember({ session, claim: 'the timeout is 30 seconds' }));
    if (added === undefined) {
      return;
    }
    assert.equal(added.appended, false);
    assert.equal(added.entryId, null);
    assert.equal(added.customType, 'ds4-context-memory-v1');
    assert.match(added.itemId, /^mem-[0-9a-f]{16}$/);
    const entry = JSON.parse(mutationEntryJson(added)) as { type: string; data: { operation: string } };
    assert.equal(entry.type, 'custom');
    assert.equal(entry.data.operation, 'add');

    const conflict = await requests.remember({ session, claim: 'retries defaults to 5' }).then(
      () => assert.fail('a conflicting claim must be refused'),
      (error: unknown) => error,
    );
    const refused = refusedWrite(conflict);
    assert.ok(refused, String(conflict));
    assert.equal(refused.conflictsWith, 'mem-vscode-1');
    assert.match(refused.message, /mem-vscode-1/);
    // What "Supersede" sends.
    const superseded = await requests.remember({ session, claim: 'retries defaults to 5', supersedes: refused.conflictsWith });
    assert.equal(superseded.data.operation, 'supersede');

    const pinned = await requests.pin({ session, content: 'Keep the public API stable.', scope: 'branch', sourceFile: join(projectDir, 'api.py') });
    assert.equal(pinned.customType, 'ds4-context-pin-v1');
    assert.match(pinned.itemId, /^pin-[0-9a-f]{16}$/);
  });

  it('opens one owned session per workspace, appends messages to it, and reopens it by id', async (t) => {
    const values = new Map<string, unknown>();
    const state = { get: (key: string) => values.get(key), update: (key: string, value: unknown) => Promise.resolve(void values.set(key, value)) };
    const owned = new OwnedSession(state, (params) => requests.sessionOpen(params));
    const opened = await orSkip(t, 'ds4/sessionOpen', () => owned.ensure());
    if (opened === undefined) {
      return;
    }
    assert.equal(opened.created, true);
    assert.deepEqual(values.get(OWNED_SESSION_KEY), { sessionId: opened.sessionId, file: opened.file });
    const appended = await requests.sessionAppend({
      session: { file: opened.file },
      messages: [
        { role: 'user', content: 'What is the retry budget?', timestamp: 1764666120000 },
        { role: 'assistant', content: [{ type: 'text', text: 'Four retries.' }], provider: 'anthropic', model: 'claude-sonnet-4-5', stopReason: 'stop', timestamp: 1764666121000 },
      ],
    });
    assert.equal(appended.entryIds.length, 2);
    assert.equal(appended.leafId, appended.entryIds[1]);
    const lines = readFileSync(opened.file, 'utf8').trim().split('\n');
    assert.equal((JSON.parse(lines[0] ?? '{}') as { type: string }).type, 'session');
    assert.equal((JSON.parse(lines.at(-1) ?? '{}') as { id: string }).id, appended.leafId);
    // A new window of the same workspace: reopened by id, the same file.
    const again = await new OwnedSession(state, (params) => requests.sessionOpen(params)).ensure();
    assert.equal(again.file, opened.file);
    assert.equal(again.created, false);
    assert.equal(again.leafId, appended.leafId);
    // The history tool's default session: a search there finds the appended turn.
    const found = await requests.retrieve({ session: { file: opened.file }, query: 'retry budget' });
    assert.equal(found.status, 'ok');
  });

  it('finds text in a tool output a plan stored as an artifact', async (t) => {
    const session = { file: artifactSession.path };
    const plan = await requests.plan({ session, request: 'why did the suite fail?', model: { provider: 'anthropic', id: 'claude-sonnet-4-5', contextWindow: 200000 } });
    assert.equal(plan.mode, 'managed');
    const result = await orSkip(t, 'ds4/artifactSearch', () => requests.artifactSearch({ query: 'zebraretryerror', session }));
    if (result === undefined) {
      return;
    }
    assert.equal(result.matches.length, 1, JSON.stringify(result));
    assert.match(result.matches[0]?.excerpt ?? '', /ZebraRetryError: expected 3 retries, got 5/);
    assert.match(renderArtifactSearch(result), /^artifact:\/\/sha256\/[0-9a-f]{64} 601:\d+/m);
  });
});
