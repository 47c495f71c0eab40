/**
 * End to end against the real `ds4-lsp`: the process is started from the command the
 * extension resolves, spoken to over stdio through the JSON-RPC layer vscode-languageclient
 * itself uses (`vscode-languageserver-protocol/node`, which is `vscode-jsonrpc/node`), with
 * the `initializationOptions` and configuration changes the extension builds and the
 * extension's own `Ds4Requests`.
 *
 * The server is `$DS4_LSP_COMMAND`, default `../../.venv/bin/ds4-lsp` from editors/vscode.
 * Everything lives in a temp directory: the workspace folder (`project/`, one source file,
 * with a two-commit Git history when git is installed),
 * the database (`DS4_DB`, outside the workspace) and a copy of
 * examples/pi-mono-v1-large-session.jsonl (915 messages, 1,018 entries).
 */

import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';

import {
  createProtocolConnection,
  DidChangeConfigurationNotification,
  ExitNotification,
  InitializedNotification,
  InitializeRequest,
  type InitializeResult,
  LogMessageNotification,
  type ProgressToken,
  type ProtocolConnection,
  ResponseError,
  ShowMessageNotification,
  ShutdownRequest,
  StreamMessageReader,
  StreamMessageWriter,
  WorkDoneProgress,
  WorkDoneProgressCreateRequest,
} from 'vscode-languageserver-protocol/node';

import { formatHistoryForModel } from '../../src/historyTool';
import { messageCount, renderManifestHtml } from '../../src/manifestView';
import { DS4_INDEX_UPDATED, DS4_RETRIEVE, DS4_USAGE, type IndexUpdatedParams, isIndexUpdated } from '../../src/protocol';
import { Ds4InvalidParamsError, Ds4Requests, type WorkDoneProgressValue } from '../../src/requests';
import { buildConfigurationChange, buildInitializationOptions, resolveServerLaunch } from '../../src/settings';
import { applyProgress, presentStatus, type StatusState } from '../../src/status';
import { reader } from '../fixtures';

const PACKAGE_ROOT = resolve(__dirname, '..', '..', '..');
const REPO_ROOT = resolve(PACKAGE_ROOT, '..', '..');
const SERVER_COMMAND = process.env.DS4_LSP_COMMAND ?? join(REPO_ROOT, '.venv', 'bin', 'ds4-lsp');
const SESSION_SOURCE = join(REPO_ROOT, 'examples', 'pi-mono-v1-large-session.jsonl');
const REQUEST_TIMEOUT_MS = 30_000;

/** Settings as a user might set them; every one must be accepted by the real server. */
const USER_SETTINGS = {
  'server.command': SERVER_COMMAND,
  'server.args': ['--log-level', 'warning'],
  'context.mode': 'managed',
  'context.recentTailTokens': 32000,
  'context.maxRetrievedHistoryTokens': 8000,
  'retrieval.maxResults': 5,
  'diagnostics.storeContextManifest': true,
  'diagnostics.logLevel': 'warn',
  'modelAwareness.overrides': { 'anthropic/*': { contextWindow: 200000, autoTune: false } },
  'modelAwareness.minimumCalibrationSamples': 3,
  'storage.busyTimeoutMs': 4000,
  'project.maxCommits': 5000,
  'privacy.enabled': true,
  'privacy.defaultClassification': 'normal',
  'privacy.localProviders': ['faux', 'ollama', 'llama-cpp', 'lmstudio', 'my-gpu-box'],
  'privacy.remoteDefaultAllowed': ['normal', 'internal'],
  'privacy.remoteProviders': { 'azure-openai': ['normal', 'internal', 'sensitive'] },
  'privacy.redactSecrets': true,
  'privacy.historyToolProvider': 'vscode-lm',
};

/** The workspace's Git history: fixed dates and author, so the same hashes every run. */
const GIT_COMMITS = [
  { date: '2024-01-02T03:04:05Z', subject: 'Add the shipping cost per kilogram' },
  { date: '2024-02-02T03:04:05Z', subject: 'Raise the base rate because the carrier surcharge changed' },
];
const GIT_QUERY = 'why was the base rate raised for the carrier surcharge';

/** Make `dir` a Git work tree with `GIT_COMMITS`, each changing src/shipping.py; false without git. */
function makeGitHistory(dir: string): boolean {
  const env = {
    ...process.env,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_AUTHOR_NAME: 'Test',
    GIT_AUTHOR_EMAIL: 'test@example.com',
    GIT_COMMITTER_NAME: 'Test',
    GIT_COMMITTER_EMAIL: 'test@example.com',
  };
  const git = (args: string[], date?: string): void => {
    execFileSync('git', args, {
      cwd: dir,
      stdio: 'ignore',
      env: date === undefined ? env : { ...env, GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date },
    });
  };
  try {
    git(['init', '-q', '-b', 'main']);
  } catch {
    return false;
  }
  GIT_COMMITS.forEach(({ date, subject }, index) => {
    const base = index === GIT_COMMITS.length - 1 ? '4.5' : '4.0';
    writeFileSync(join(dir, 'src', 'shipping.py'), `def shipping_cost(weight_kg):\n    return ${base} + 1.2 * weight_kg\n`);
    git(['add', '-A']);
    git(['commit', '-q', '-m', subject], date);
  });
  return true;
}

describe('ds4-lsp end to end, through the extension’s client code', { timeout: 120_000 }, () => {
  let workDir: string;
  let projectDir: string;
  let hasGit = false;
  let sessionFile: string;
  let server: ChildProcessWithoutNullStreams;
  let connection: ProtocolConnection;
  let requests: Ds4Requests;
  let initializeResult: InitializeResult;
  let exitCode: Promise<number | null>;
  const shownMessages: string[] = [];
  const logMessages: string[] = [];
  const indexUpdates: IndexUpdatedParams[] = [];
  /** Progress on tokens the server created, by token, as the status bar would see it. */
  const serverProgress = new Map<ProgressToken, WorkDoneProgressValue[]>();
  let stderr = '';
  /** The manifest of the first plan (usage is reported for it). */
  let plannedManifestId = '';
  let plannedEstimate = 0;

  before(async () => {
    assert.ok(
      existsSync(SERVER_COMMAND),
      `ds4-lsp not found at ${SERVER_COMMAND}: run ./scripts/test.sh (it creates .venv) or set DS4_LSP_COMMAND`,
    );
    workDir = mkdtempSync(join(tmpdir(), 'ds4-vscode-e2e-'));
    projectDir = join(workDir, 'project');
    mkdirSync(join(projectDir, 'src'), { recursive: true });
    writeFileSync(join(projectDir, 'src', 'shipping.py'), 'def shipping_cost(weight_kg):\n    return 4.5 + 1.2 * weight_kg\n');
    hasGit = makeGitHistory(projectDir);
    mkdirSync(join(workDir, 'sessions'));
    sessionFile = join(workDir, 'sessions', 'pi-mono-v1-large-session.jsonl');
    copyFileSync(SESSION_SOURCE, sessionFile);

    const settings = reader(USER_SETTINGS);
    const launch = resolveServerLaunch(settings, { homeDir: workDir, workspaceFolder: projectDir });
    server = spawn(launch.command, launch.args, {
      cwd: projectDir,
      env: { ...process.env, DS4_DB: join(workDir, 'db', 'context.db') },
    });
    exitCode = new Promise((resolveExit) => server.on('exit', (code) => { resolveExit(code); }));
    server.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });

    // createProtocolConnection is how vscode-languageclient wraps vscode-jsonrpc's
    // createMessageConnection; the stream reader and writer are the ones it uses for stdio.
    connection = createProtocolConnection(new StreamMessageReader(server.stdout), new StreamMessageWriter(server.stdin));
    connection.onNotification(ShowMessageNotification.type, (params) => {
      shownMessages.push(params.message);
    });
    connection.onNotification(LogMessageNotification.type, (params) => {
      logMessages.push(params.message);
    });
    connection.onNotification(DS4_INDEX_UPDATED, (params: unknown) => {
      assert.ok(isIndexUpdated(params), JSON.stringify(params));
      indexUpdates.push(params);
    });
    // What the extension's ServerProgressFeature does: follow each token the server creates.
    connection.onRequest(WorkDoneProgressCreateRequest.type, ({ token }) => {
      serverProgress.set(token, []);
      connection.onProgress(WorkDoneProgress.type, token, (value) => {
        serverProgress.get(token)?.push(value);
      });
    });
    connection.listen();

    initializeResult = await withTimeout(
      connection.sendRequest(InitializeRequest.type, {
        processId: process.pid,
        // eslint-disable-next-line @typescript-eslint/no-deprecated -- a required field; VS Code still sends it
        rootUri: pathToFileURL(projectDir).href,
        workspaceFolders: [{ uri: pathToFileURL(projectDir).href, name: 'e2e' }],
        capabilities: {
          window: { workDoneProgress: true },
          workspace: { configuration: true, workspaceFolders: true },
        },
        // An untrusted workspace, as the extension reports it before the user grants trust.
        initializationOptions: buildInitializationOptions(false, settings, { homeDir: workDir, workspaceFolder: projectDir }),
      }),
      'initialize',
    );
    await connection.sendNotification(InitializedNotification.type, {});
    requests = new Ds4Requests(connection);
  });

  after(() => {
    // The server's own account of what went wrong, when something did.
    // (Ignoring pygls's line about the InvalidParams this test provokes on purpose.)
    if (stderr.split('\n').some((line) => /Traceback| ERROR (?!pygls\.protocol\.json_rpc: Exception occurred for message "\d+" \[JsonRpcInvalidParams\])/.test(line))) {
      process.stderr.write(`--- ds4-lsp stderr ---\n${stderr}\n`);
    }
    connection.dispose();
    if (server.exitCode === null) {
      server.kill();
    }
    rmSync(workDir, { recursive: true, force: true });
  });

  it('starts from the extension’s launch command and accepts every setting the extension sends', async () => {
    assert.equal(initializeResult.serverInfo?.name, 'ds4-lsp');
    const commands = initializeResult.capabilities.executeCommandProvider?.commands ?? [];
    assert.ok(commands.includes('ds4.rebuildIndex') && commands.includes('ds4.health'), commands.join(', '));
    const health = await withTimeout(requests.health(), 'ds4.health');
    assert.deepEqual(health.configWarnings, [], 'the server ignored a setting the extension sent');
    assert.deepEqual(shownMessages, [], `warnings shown: ${shownMessages.join(' | ')}`);
    assert.equal(health.server.trusted, false);
  });

  it('plans the next call of a 915-message session within the budget', async () => {
    const plan = await withTimeout(
      requests.plan({
        session: { file: sessionFile },
        request: 'which selector files did we port to the theme system?',
        model: { provider: 'anthropic', id: 'claude-sonnet-4-5' },
        fixedTokens: 4200,
      }),
      'ds4/plan',
    );
    assert.equal(plan.mode, 'managed');
    assert.equal(plan.stats.counts.messages, 915);
    assert.ok(plan.messages.length < 915, `${String(plan.messages.length)} messages`);
    assert.equal(plan.model.contextWindow, 200000);
    assert.equal(plan.model.source, 'override', 'modelAwareness.overrides from the settings was used');
    assert.equal(plan.budget.recentTailTokens, 32000, 'context.recentTailTokens from the settings was used');
    assert.ok(plan.estimatedTokens <= plan.budget.targetInputTokens);
    assert.ok(plan.manifestStored);
    assert.equal(plan.session?.file, sessionFile);
    assert.ok(logMessages.some((line) => line.startsWith('ds4/plan: mode=managed')));

    const manifest = await withTimeout(requests.manifest({ id: plan.manifestId, view: 'full' }), 'ds4/manifest');
    assert.equal(manifest.id, plan.manifestId);
    assert.equal(manifest.included?.length, plan.stats.counts.included);
    // the older turns beyond the newest 128 are one bulk item counting its messages
    const excludedMessages = (manifest.excluded ?? []).reduce((total, item) => total + messageCount(item), 0);
    assert.equal(manifest.excludedRollup?.total ?? excludedMessages, plan.stats.counts.excluded);
    assert.ok((manifest.excluded ?? []).some((item) => messageCount(item) > 1), 'a bulk item');
    assert.equal(manifest.fixedTokens, 4200);

    const html = renderManifestHtml(manifest, { nonce: 'e2eNonce0123456789abcdef', plan });
    assert.ok(html.includes(plan.manifestId));
    assert.doesNotMatch(html, /<script/i);
    const firstExcluded = manifest.excluded?.[0];
    assert.ok(firstExcluded);
    assert.ok(html.includes(firstExcluded.reason.replace(/&/g, '&amp;').replace(/'/g, '&#39;').replace(/</g, '&lt;')));
    if (manifest.relevance !== undefined) {
      assert.ok(manifest.relevance.history, JSON.stringify(manifest.relevance));
      assert.match(html, /<h2>Relevance/);
      assert.match(html, /<tr><td>history<\/td>/);
    }

    const latest = await withTimeout(
      requests.manifest({ session: { file: sessionFile }, latest: true }),
      'ds4/manifest latest',
    );
    assert.equal(latest.id, plan.manifestId);
    assert.deepEqual(latest.itemCounts, { included: plan.stats.counts.included, excluded: plan.stats.counts.excluded });
    plannedManifestId = plan.manifestId;
    plannedEstimate = plan.estimatedTokens;
  });

  it('records the usage a provider reported: the manifest shows actual vs estimated tokens and the cache share', async (t) => {
    assert.ok(plannedManifestId !== '', 'the plan test ran first');
    // Refused locally, naming the field: nothing is sent.
    await assert.rejects(
      requests.usage({ manifestId: plannedManifestId, provider: 'anthropic', model: 'claude-sonnet-4-5', usage: { input: -1 } }),
      (error: unknown) => error instanceof Ds4InvalidParamsError && error.message.includes('params.usage.input must be an integer >= 0'),
    );
    // Sent anyway (another client): the server logs it and keeps serving.
    await connection.sendNotification(DS4_USAGE, { manifestId: plannedManifestId, usage: { input: 'many' } });
    const health = await withTimeout(requests.health(), 'ds4.health after a malformed ds4/usage');
    if (health.calibration === undefined) {
      t.skip('this ds4-lsp has no model awareness yet (ds4.health has no `calibration`): ds4/usage is not served');
      return;
    }
    const before = await withTimeout(requests.manifest({ id: plannedManifestId }), 'ds4/manifest');
    assert.equal(before.actualTokens, null, 'the malformed report changed nothing');

    // What Anthropic reported for the call, in Pi's Usage shape (totalTokens and cost ignored).
    const cacheRead = Math.round(plannedEstimate * 0.8);
    const input = Math.round(plannedEstimate * 0.3);
    const cacheWrite = 120;
    await requests.usage({
      manifestId: plannedManifestId,
      provider: 'anthropic',
      model: 'claude-sonnet-4-5',
      usage: { input, output: 512, cacheRead, cacheWrite, totalTokens: input + 512 + cacheRead + cacheWrite, cost: { total: 0.05 } },
      stopReason: 'stop',
    });
    const manifest = await withTimeout(
      waitFor(async () => {
        const answer = await requests.manifest({ id: plannedManifestId, view: 'full' });
        return answer.actualTokens === null ? undefined : answer;
      }),
      'the manifest with actualTokens',
    );
    const actual = input + cacheRead + cacheWrite;
    assert.equal(manifest.actualTokens, actual);
    assert.equal(manifest.usage?.cacheRead, cacheRead);
    assert.equal(manifest.usage.output, 512);
    assert.equal(manifest.usage.stopReason, 'stop');
    assert.equal(manifest.usage.cacheShare, Math.round((10_000 * cacheRead) / actual) / 10_000);
    assert.equal(manifest.modelAwareness?.calibration?.provider, 'anthropic');

    const html = renderManifestHtml(manifest, { nonce: 'e2eNonce0123456789abcdef' });
    const formatted = actual.toLocaleString('en-US');
    assert.match(html, new RegExp(`<div class="value">${formatted} tokens</div><div class="detail">[+−±][\\d.]+% vs the [\\d,]+-token estimate; cache share `));
    assert.match(html, /<tr><td>Cache share<\/td><td class="num">\d+\.\d%<\/td>/);

    const after = await withTimeout(requests.health(), 'ds4.health');
    const profile = after.calibration?.find((entry) => entry.provider === 'anthropic' && entry.model === 'claude-sonnet-4-5');
    assert.ok(profile, JSON.stringify(after.calibration));
    assert.ok(profile.samples >= 1, JSON.stringify(profile));
  });

  it('retrieves history with the maxResults the settings set', async () => {
    const result = await withTimeout(
      requests.retrieve({ session: { file: sessionFile }, query: 'port user-message-selector.ts DynamicBorder to the theme' }),
      'ds4/retrieve',
    );
    assert.equal(result.status, 'ok');
    assert.ok(result.history.length >= 1 && result.history.length <= 5, `${String(result.history.length)} hits`);
    assert.ok(result.history.some((hit) => hit.excerpt.includes('user-message-selector')));
  });

  it('answers the git scope of an untrusted workspace with untrusted, and reads nothing', async () => {
    const result = await withTimeout(requests.retrieve({ query: GIT_QUERY, scopes: ['git'] }), 'ds4/retrieve git');
    assert.equal(result.gitStatus, 'untrusted');
    assert.deepEqual(result.git, []);
    assert.match(formatHistoryForModel(result, 40_000, ['git']), /not trusted, so its Git history is not read/);
  });

  it('surfaces the server’s InvalidParams message for bad input', async () => {
    await assert.rejects(
      requests.retrieve({ session: { file: sessionFile }, query: 'x', maxResults: 0 }),
      (error: unknown) => {
        assert.ok(error instanceof ResponseError);
        assert.equal(error.code, -32602);
        assert.match(error.message, new RegExp(`^${DS4_RETRIEVE}: params\\.maxResults`));
        return true;
      },
    );
  });

  it('rebuilds the index with progress the status bar can show', async () => {
    const progress: WorkDoneProgressValue[] = [];
    const texts: string[] = [];
    let status: StatusState = { phase: { kind: 'ready' }, trusted: false };
    const result = await withTimeout(
      requests.rebuildIndex((value) => {
        progress.push(value);
        status = applyProgress(status, value);
        texts.push(presentStatus(status).text);
      }),
      'ds4.rebuildIndex',
    );
    assert.equal(result.sessions, 1);
    assert.equal(result.entries, 1018);
    assert.deepEqual(result.failed, []);
    assert.deepEqual(
      progress.map((value) => value.kind),
      ['begin', ...progress.slice(1, -1).map(() => 'report'), 'end'],
    );
    assert.equal(progress[0]?.kind === 'begin' && progress[0].title, 'ds4: rebuilding the index');
    assert.ok(progress.some((value) => value.kind === 'report' && value.percentage === 100));
    assert.equal(texts[0], '$(sync~spin) DS4 indexing 0%');
    assert.ok(texts.includes('$(sync~spin) DS4 indexing 100%'));
    assert.equal(texts.at(-1), '$(shield) DS4 untrusted');
  });

  it('applies a settings change and a trust grant as the extension sends them', async () => {
    const changed = reader({ ...USER_SETTINGS, 'context.mode': 'observer' });
    await connection.sendNotification(DidChangeConfigurationNotification.type, buildConfigurationChange(true, changed));
    const health = await withTimeout(requests.health(), 'ds4.health');
    assert.equal(health.server.trusted, true);
    assert.deepEqual(health.configWarnings, [], '`trusted` must not be taken for an unknown setting');
    await requests.toolExecuted({ tool: 'edit', paths: ['src/shipping.py'] });
    const plan = await withTimeout(requests.plan({ session: { file: sessionFile }, request: 'what next?' }), 'ds4/plan');
    assert.equal(plan.mode, 'observer');
    assert.deepEqual(shownMessages, []);
  });

  it('indexes the project once trusted, with progress the status bar shows', async (t) => {
    const commands = initializeResult.capabilities.executeCommandProvider?.commands ?? [];
    if (!commands.includes('ds4.projectStatus')) {
      t.skip('this ds4-lsp has no project knowledge');
      return;
    }
    const update = await withTimeout(waitFor(() => indexUpdates.find((params) => params.reason === 'trust')), 'ds4/indexUpdated');
    assert.equal(update.status, 'ready');
    assert.ok(update.filesIndexed >= 1, JSON.stringify(update));
    const run = await withTimeout(
      waitFor(() =>
        [...serverProgress.values()].find((values) => values[0]?.kind === 'begin' && values.at(-1)?.kind === 'end'),
      ),
      'progress of the project index',
    );
    assert.match(run[0]?.kind === 'begin' ? run[0].title : '', /project/);
    let status: StatusState = { phase: { kind: 'ready' }, trusted: true };
    const texts = run.map((value) => presentStatus((status = applyProgress(status, value))).text);
    assert.match(texts[0] ?? '', /^\$\(sync~spin\) DS4 indexing/);
    assert.equal(texts.at(-1), '$(database) DS4 ready');
  });

  it('answers the git scope with the commits of the trusted workspace, and why none for an unrelated request', async (t) => {
    if (!hasGit) {
      t.skip('git is not installed');
      return;
    }
    const commits = await withTimeout(
      waitFor(async () => {
        const answer = await requests.retrieve({ query: GIT_QUERY, scopes: ['git'] });
        return answer.gitStatus === 'no-index' ? undefined : answer;
      }),
      'ds4/retrieve git',
    );
    assert.equal(commits.gitStatus, 'ok', JSON.stringify(commits));
    const best = commits.git?.[0];
    assert.ok(best, JSON.stringify(commits));
    assert.equal(best.subject, GIT_COMMITS[1]?.subject);
    assert.equal(best.committedAt, GIT_COMMITS[1]?.date);
    assert.deepEqual(best.files, ['src/shipping.py']);
    assert.match(best.hash, /^[0-9a-f]{40}$/);
    assert.equal(commits.relevance?.git?.sent, commits.git?.length);
    assert.equal(commits.relevance?.git?.why, null);
    const text = formatHistoryForModel(commits, 40_000, ['git']);
    assert.match(text, /DS4 git history search .*commits, best first/);
    assert.ok(text.includes(best.quoted));

    const all = await withTimeout(
      requests.retrieve({ session: { file: sessionFile }, query: GIT_QUERY, scopes: ['history', 'project', 'git'] }),
      'ds4/retrieve three scopes',
    );
    assert.equal(all.gitStatus, 'ok');
    assert.ok(all.relevance?.history && all.relevance.project && all.relevance.git, JSON.stringify(all.relevance));

    const unrelated = await withTimeout(
      requests.retrieve({ query: 'Write a haiku about the sea, please.', scopes: ['git'] }),
      'ds4/retrieve git, unrelated',
    );
    assert.deepEqual(unrelated.git, []);
    const why = unrelated.relevance?.git?.why;
    assert.ok(typeof why === 'string' && why !== '', JSON.stringify(unrelated.relevance));
    assert.ok(formatHistoryForModel(unrelated, 40_000, ['git']).includes(`Why: ${why}.`));

    const health = await withTimeout(requests.health(), 'ds4.health');
    assert.equal(health.project?.commits, GIT_COMMITS.length);
  });

  it('shuts down cleanly', async () => {
    await withTimeout(connection.sendRequest(ShutdownRequest.type), 'shutdown');
    await connection.sendNotification(ExitNotification.type);
    assert.equal(await withTimeout(exitCode, 'exit'), 0, stderr);
  });
});

/** Resolves with `find()`'s first defined answer, polling every 20 ms (notifications arrive on their own). */
async function waitFor<T>(find: () => T | undefined | Promise<T | undefined>): Promise<T> {
  for (;;) {
    const found = await find();
    if (found !== undefined) {
      return found;
    }
    await new Promise((resolveSoon) => setTimeout(resolveSoon, 20));
  }
}

function withTimeout<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`${what}: no answer within ${String(REQUEST_TIMEOUT_MS)} ms`));
    }, REQUEST_TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => {
    clearTimeout(timer);
  });
}
