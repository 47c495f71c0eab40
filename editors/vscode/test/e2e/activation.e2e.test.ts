/**
 * The compiled extension, activated against a stub `vscode` module (`vscodeStub.ts`) and the
 * real `ds4-lsp`, started by vscode-languageclient itself: the API, the palette commands, the
 * status bar, the manifest webview, the history tool, a trust grant, compaction with a summary
 * written by a (stub) editor chat model and the summary graph, turning the editor model off,
 * a launch setting change and deactivation. The server is `$DS4_LSP_COMMAND`, default `../../.venv/bin/ds4-lsp`.
 */

import assert from 'node:assert/strict';
import { appendFileSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';

import type { Ds4Api } from '../../src/api';
import type { CompactResult, PlanResult } from '../../src/protocol';
import { contractSummary } from '../fixtures';
import { SessionWriter } from '../sessionWriter';
import { type StubChatModel, StubVscode } from './vscodeStub';

const PACKAGE_ROOT = resolve(__dirname, '..', '..', '..');
const REPO_ROOT = resolve(PACKAGE_ROOT, '..', '..');
const SERVER_COMMAND = process.env.DS4_LSP_COMMAND ?? join(REPO_ROOT, '.venv', 'bin', 'ds4-lsp');
const SESSION_SOURCE = join(REPO_ROOT, 'examples', 'pi-mono-v1-large-session.jsonl');

interface Extension {
  activate(context: unknown): Ds4Api;
  deactivate(): Promise<void>;
}

interface HistoryTool {
  prepareInvocation(options: { input: unknown }): { invocationMessage: string; confirmationMessages?: unknown };
  invoke(options: { input: unknown }): Promise<{ content: { value: string }[] }>;
}

describe('the extension, activated without VS Code', { timeout: 120_000 }, () => {
  const vscode = new StubVscode();
  let workDir: string;
  let sessionFile: string;
  let extension: Extension;
  let api: Ds4Api;
  /** The extension's workspaceState. */
  const state = new Map<string, unknown>();
  const plans: PlanResult[] = [];
  let compactSession: SessionWriter;
  /** Prompts the stub chat model received. */
  const prompts: string[] = [];
  const chatModel: StubChatModel = {
    id: 'stub-model-1',
    vendor: 'stub',
    family: 'stub-family',
    name: 'Stub Model',
    maxInputTokens: 100_000,
    sendRequest(messages) {
      const prompt = (messages[0] as { content: string }).content;
      prompts.push(prompt);
      const answer = contractSummary(prompt);
      async function* text(): AsyncIterable<string> {
        await Promise.resolve();
        yield answer;
      }
      return Promise.resolve({ text: text() });
    },
  };

  before(async () => {
    assert.ok(existsSync(SERVER_COMMAND), `ds4-lsp not found at ${SERVER_COMMAND}: set DS4_LSP_COMMAND`);
    workDir = mkdtempSync(join(tmpdir(), 'ds4-vscode-activation-'));
    mkdirSync(join(workDir, 'sessions'));
    sessionFile = join(workDir, 'sessions', 'pi-mono-v1-large-session.jsonl');
    copyFileSync(SESSION_SOURCE, sessionFile);
    vscode.settings.set('server.command', SERVER_COMMAND);
    vscode.settings.set('databasePath', join(workDir, 'db', 'context.db'));
    vscode.settings.set('retrieval.maxResults', 3);
    // A short verbatim tail, so the small synthetic session below has something to compact.
    vscode.settings.set('compaction.keepRecentTokens', 200);
    vscode.settings.set('compaction.modelFamily', 'stub-family');
    vscode.chatModels = [chatModel];
    compactSession = new SessionWriter(join(workDir, 'sessions', 'compact-me.jsonl'));
    for (const n of [1, 2, 3]) {
      compactSession.turn(n);
    }
    vscode.install();
    extension = await import('../../src/extension.js');
    api = extension.activate({
      subscriptions: [],
      workspaceState: {
        get: (key: string) => state.get(key),
        update: (key: string, value: unknown) => {
          state.set(key, value);
          return Promise.resolve();
        },
      },
    });
    api.onDidPlan((plan) => plans.push(plan));
  });

  after(async () => {
    // (vscode-languageclient leaves its 5 s stop timer running, so this file ends that much later.)
    await extension.deactivate();
    assert.equal(vscode.statusTexts.at(-1), '$(circle-slash) DS4 stopped');
    rmSync(workDir, { recursive: true, force: true });
  });

  it('registers the palette commands and the history tool, and starts the server', async () => {
    assert.deepEqual([...vscode.commands.keys()].sort(), [
      'ds4.client.compact',
      'ds4.client.copyCompactionEntry',
      'ds4.client.health',
      'ds4.client.memoryAction',
      'ds4.client.pinSelection',
      'ds4.client.plan',
      'ds4.client.privacy',
      'ds4.client.rebuildIndex',
      'ds4.client.remember',
      'ds4.client.restartServer',
      'ds4.client.searchArtifacts',
      'ds4.client.showManifest',
      'ds4.client.showMemory',
      'ds4.client.showOutput',
      'ds4.client.summaries',
    ]);
    assert.deepEqual([...vscode.tools.keys()], ['ds4_retrieve_history']);
    await api.retrieve({ query: 'warm-up' }); // waits for the server
    assert.equal(vscode.statusTexts.at(-1), '$(shield) DS4 untrusted');
    assert.ok(vscode.statusTexts.includes('$(sync~spin) DS4 starting'));
    assert.ok(vscode.outputLines.some((line) => line.startsWith(`info DS4: starting ${SERVER_COMMAND}`)));
    assert.ok(vscode.outputLines.includes('info DS4: compaction summaries are written by an editor chat model (ds4/summarize offered)'));
  });

  it('plans through the API, fires onDidPlan and shows the plan in the status tooltip', async () => {
    const plan = await api.plan({ session: { file: sessionFile }, request: 'which selector files did we port to the theme system?' });
    assert.equal(plan.mode, 'managed');
    assert.deepEqual(plans.map((seen) => seen.manifestId), [plan.manifestId]);
    assert.match(vscode.statusTooltip, new RegExp(`Last plan: [\\d,]+ of 200,000 tokens \\(managed\\), ${plan.manifestId}`));
  });

  it('"DS4: Plan Request" plans the picked session and shows its manifest in a script-free webview', async () => {
    vscode.inputBoxAnswer = 'what did we decide about DynamicBorder?';
    await vscode.commands.get('ds4.client.plan')?.();
    const plan = plans.at(-1);
    assert.ok(plan && plans.length === 2);
    assert.equal(plan.session?.file, sessionFile, 'the quick pick offered the last session first');
    assert.deepEqual(vscode.webviewOptions, { enableScripts: false, enableCommandUris: false, localResourceRoots: [] });
    const html = vscode.webviewHtml() ?? '';
    assert.ok(html.includes(plan.manifestId));
    assert.match(html, /Content-Security-Policy" content="default-src 'none'; style-src 'nonce-[A-Za-z0-9+/=]+';"/);
    assert.doesNotMatch(html, /<script/i);
    assert.ok(vscode.messages.some((message) => message.text.startsWith('DS4 managed: ')));

    vscode.clearWebview();
    await vscode.commands.get('ds4.client.showManifest')?.();
    assert.ok(vscode.webviewHtml()?.includes(plan.manifestId), 'Show Manifest shows the last plan');
  });

  it('reports usage through the API: bad params are refused naming the field, and the open manifest view shows the actual tokens', async (t) => {
    const plan = plans.at(-1);
    assert.ok(plan);
    await assert.rejects(
      api.reportUsage({ manifestId: plan.manifestId, provider: 'anthropic', model: '', usage: { input: 10 } }),
      /^Ds4InvalidParamsError: ds4\/usage: params\.model must be a non-empty string of at most 256 characters, got ""$/,
    );
    const before = await api.manifest({ id: plan.manifestId });
    if (before.usage === undefined) {
      t.skip('this ds4-lsp has no model awareness yet (no `usage` in the manifest): ds4/usage is not served');
      return;
    }
    assert.equal(before.actualTokens, null);
    await vscode.commands.get('ds4.client.showManifest')?.();
    assert.match(vscode.webviewHtml() ?? '', /the provider has not reported usage/);
    await api.reportUsage({
      manifestId: plan.manifestId,
      provider: plan.model.provider,
      model: plan.model.id,
      usage: { input: 900, output: 210, cacheRead: 30_000, cacheWrite: 0 },
      stopReason: 'stop',
    });
    // The open view of that plan is refreshed in the background.
    const html = await waitUntil(() => {
      const shown = vscode.webviewHtml() ?? '';
      return shown.includes('<div class="value">30,900 tokens</div>') ? shown : undefined;
    });
    assert.match(html, /<tr><td>Cache share<\/td><td class="num">97\.1%<\/td>/);
    assert.match(html, /<tr><td>Stop reason<\/td><td class="num">stop<\/td>/);
    assert.equal((await api.manifest({ id: plan.manifestId })).actualTokens, 30_900);
  });

  it('answers chat agents through the history tool, asking first in an untrusted workspace', async () => {
    const tool = vscode.tools.get('ds4_retrieve_history') as HistoryTool;
    const prepared = tool.prepareInvocation({ input: { query: 'DynamicBorder theme' } });
    assert.equal(prepared.invocationMessage, 'Searching DS4 session history for "DynamicBorder theme"');
    assert.ok(prepared.confirmationMessages);
    const result = await tool.invoke({ input: { query: 'DynamicBorder theme' } });
    const text = result.content[0]?.value ?? '';
    assert.match(text, /^DS4 history search \(query "DynamicBorder theme"\): [1-3] entries, best first/);
    assert.match(text, /\[BEGIN DS4 HISTORY EXCERPT\]/);
    await assert.rejects(tool.invoke({ input: { query: '' } }), /"query" is required/);
    // The git scope needs no session; without a trusted workspace folder no Git history is read.
    const git = await tool.invoke({ input: { query: 'why was the theme changed', scopes: ['git'] } });
    assert.match(
      git.content[0]?.value ?? '',
      /^DS4 git history search \(query "why was the theme changed"\): (the workspace is not trusted|no workspace folder is open)/,
    );
    assert.equal(
      tool.prepareInvocation({ input: { query: 'x', scopes: ['history', 'git'] } }).invocationMessage,
      'Searching DS4 session history, Git history for "x"',
    );
  });

  it('"DS4: Rebuild Index" shows progress in the status bar, then the result', async () => {
    const before = vscode.statusTexts.length;
    await vscode.commands.get('ds4.client.rebuildIndex')?.();
    const texts = vscode.statusTexts.slice(before);
    assert.ok(texts.includes('$(sync~spin) DS4 indexing 100%'), texts.join(' | '));
    assert.equal(texts.at(-1), '$(shield) DS4 untrusted');
    assert.match(vscode.messages.at(-1)?.text ?? '', /^DS4: rebuilt 1 session\(s\), 1,018 entries/);
  });

  it('tells the server when the user trusts the workspace', async () => {
    vscode.isTrusted = true;
    vscode.trustGranted.fire(undefined);
    assert.equal(vscode.statusTexts.at(-1), '$(database) DS4 ready');
    // The grant travels as a notification; "DS4: Health" shows when the server has it.
    const health = async (): Promise<string> => {
      await vscode.commands.get('ds4.client.health')?.();
      return vscode.messages.at(-1)?.text ?? '';
    };
    let text = await health();
    while (!text.includes('; workspace trusted')) {
      assert.match(text, /; workspace not trusted/);
      text = await health();
    }
  });

  let compacted: CompactResult | undefined;

  it('"DS4: Compact Session" has the editor model write the summary and shows the result rendered', async () => {
    // Pick "Choose a session file…" (the last item) and the synthetic session in the dialog.
    vscode.quickPick = (items) => items.at(-1);
    vscode.openDialogAnswer = compactSession.path;
    vscode.inputBoxAnswer = 'the parser fixes';
    const shown = vscode.shownDocuments.length;
    const statusBefore = vscode.statusTexts.length;
    await vscode.commands.get('ds4.client.compact')?.();
    vscode.quickPick = (items) => items[0];
    const statusDuring = vscode.statusTexts.slice(statusBefore);
    assert.ok(statusDuring.some((text) => text.startsWith('$(sync~spin) DS4 compacting')), statusDuring.join(' | '));
    assert.equal(statusDuring.at(-1), '$(database) DS4 ready');
    vscode.inputBoxAnswer = '';

    assert.equal(prompts.length, 1, 'the server asked the extension for the summary');
    assert.ok(prompts[0]?.includes('<custom-instructions>\nthe parser fixes\n</custom-instructions>'), 'the focus reached the prompt');
    assert.deepEqual(vscode.modelSelectors.at(-1), { family: 'stub-family' });
    const message = vscode.messages.at(-1)?.text ?? '';
    assert.match(message, /^DS4: summary (s-[0-9a-f]{16}) prepared, written by the editor model, validation valid\. The agent \(Pi\) must append the compaction entry; ds4 never writes the session file\.$/);
    const summaryId = /(s-[0-9a-f]{16})/.exec(message)?.[1] ?? '';
    // Rendered in the Markdown preview, not opened as source.
    assert.equal(vscode.shownDocuments.length, shown);
    const document = vscode.executedCommands.filter((call) => call.command === 'markdown.showPreviewToSide').at(-1);
    assert.ok(document?.text !== undefined, 'the compaction opened in the Markdown preview');
    assert.equal(document.argument, `ds4-view:/compaction/${summaryId}.md`);
    assert.ok(document.text.includes('| Summarizer | client (stub/stub\\-model\\-1) |'), document.text); // the model's name, escaped
    assert.ok(document.text.includes('| Fallback reason | — |'));
    assert.ok(document.text.includes('ds4 has not written anything to the session file'));
    assert.ok(document.text.includes('```text\n## Objective\n- Fix the parser bugs step by step while keeping the API stable.'), 'the summary, fenced');
    // Nothing was written to the session file: its last entry is still the last turn's reply.
    assert.doesNotMatch(readFileSync(compactSession.path, 'utf8').trim().split('\n').at(-1) ?? '', /"type":"compaction"/);

    await vscode.commands.get('ds4.client.copyCompactionEntry')?.();
    const entry = JSON.parse(vscode.clipboard.at(-1) ?? '{}') as { type?: string; details?: { ds4ContextEngine?: { summaryId?: string } } };
    assert.equal(entry.type, 'compaction');
    assert.equal(entry.details?.ds4ContextEngine?.summaryId, summaryId);

    // An agent extension appends the entry through Pi and reports it through the API.
    compacted = await api.compact({ session: { file: compactSession.path }, reason: 'threshold' });
    assert.equal(compacted.summarizer, 'client');
    const entryId = compactSession.compaction(compacted);
    await api.compactCommitted(compacted.summaryId, entryId);
    await api.compactFailed(summaryId, 'superseded');
    let graph = await api.summaries({ session: { file: compactSession.path } });
    while (graph.nodes.find((node) => node.summaryId === compacted?.summaryId)?.lifecycle !== 'committed') {
      graph = await api.summaries({ session: { file: compactSession.path } });
    }
    assert.equal(graph.activeRootId, compacted.summaryId);
  });

  it('"DS4: Show Summary Graph" shows the tree read-only and opens the DOT on request', async () => {
    assert.ok(compacted, 'needs the compaction above');
    const shown = vscode.shownDocuments.length;
    await vscode.commands.get('ds4.client.summaries')?.(); // the last session used comes first
    const tree = vscode.shownDocuments[shown];
    assert.ok(tree);
    assert.match(tree.uri, /^ds4-view:\/summaries\/0a1b2c3d-e2e-sess\.txt$/);
    assert.equal(tree.languageId, 'plaintext');
    assert.ok(tree.text.includes(`active root: ${compacted.summaryId}`), tree.text);
    assert.match(tree.text, new RegExp(`\\* ${compacted.summaryId} segment L0 committed valid \\d+ tok \\(active root\\)`));
    assert.match(vscode.messages.at(-1)?.text ?? '', /^DS4: \d+ summary node\(s\) in session 0a1b2c3d-e2e-sess, active root s-/);

    // "Open as Graphviz DOT": a .dot document (language dot when an extension provides it).
    vscode.nextMessageChoice = 'Open as Graphviz DOT';
    await vscode.commands.get('ds4.client.summaries')?.();
    const dot = vscode.shownDocuments.at(-1);
    assert.equal(dot?.uri, 'ds4-view:/summaries/0a1b2c3d-e2e-sess.dot');
    assert.match(dot.text, /^digraph summaries \{/);
    assert.equal(dot.languageId, 'plaintext', 'no Graphviz extension in the stub: the unknown language is ignored');
  });

  it('stops offering ds4/summarize when ds4.compaction.useEditorModel is turned off (restart), and the server compacts offline', async () => {
    vscode.settings.set('compaction.useEditorModel', false);
    vscode.configurationChanged.fire({ affectsConfiguration: (section) => section === 'ds4' });
    await waitFor(() => vscode.outputLines.includes('info DS4: compaction summaries are written offline by the server (ds4/summarize not offered)'));
    compactSession.turn(4);
    compactSession.turn(5);
    const asked = prompts.length;
    const result = await api.compact({ session: { file: compactSession.path } });
    assert.equal(prompts.length, asked, 'the model was not asked');
    assert.equal(result.summarizer, 'offline');
    assert.match(result.fallbackReason ?? '', /no model summarizer was offered/);
    await api.compactFailed(result.summaryId);
    vscode.settings.set('compaction.useEditorModel', true);
    vscode.configurationChanged.fire({ affectsConfiguration: (section) => section === 'ds4' });
    await waitFor(() => vscode.outputLines.filter((line) => line.endsWith('(ds4/summarize offered)')).length === 2);
  });

  it('shows in the manifest what the privacy policy withheld from a remote model, and answers "DS4: Privacy Policy"', async () => {
    const SECRET = 'hunter2-staging-0xC0FFEE';
    const writer = new SessionWriter(join(workDir, 'sessions', 'private.jsonl'), '0a1b2c3d-e2e-private');
    writer.turn(1, 'deploy');
    writer.user(`The staging password is [ds4:local-only]${SECRET}[/ds4:local-only]; keep it on this machine.`);
    writer.assistant('Understood: it stays local.');
    const plan = await api.plan({
      session: { file: writer.path },
      request: 'what do we deploy next?',
      model: { provider: 'openai', id: 'gpt-4o' },
    });
    assert.equal(plan.privacy?.destination?.kind, 'remote');
    assert.ok((plan.privacy.withheld?.['local-only'] ?? 0) >= 1, JSON.stringify(plan.privacy));
    assert.ok(!JSON.stringify(plan.messages).includes(SECRET), 'the local-only text never goes to openai');
    vscode.clearWebview();
    await vscode.commands.get('ds4.client.showManifest')?.();
    const html = vscode.webviewHtml() ?? '';
    assert.ok(html.includes(plan.manifestId));
    assert.match(html, /destination <code>openai<\/code> · <strong>remote<\/strong> · may see normal, internal · secrets redacted/);
    // The local-only row: classified, then withheld (at least one), then excluded.
    assert.match(html, /<tr><td>local-only<\/td><td class="num">[\d,]+<\/td><td class="num">[1-9][\d,]*<\/td><td class="num">[\d,]+<\/td><\/tr>/);
    assert.ok(!html.includes(SECRET));

    // The #ds4History tool names vscode-lm (remote): the local-only text never reaches the chat model.
    const tool = vscode.tools.get('ds4_retrieve_history') as HistoryTool;
    const found = await tool.invoke({ input: { query: 'staging password', sessionFile: writer.path } });
    assert.ok(!(found.content[0]?.value ?? '').includes(SECRET));

    vscode.inputBoxAnswer = 'openai/gpt-4o';
    await vscode.commands.get('ds4.client.privacy')?.();
    assert.equal(
      vscode.messages.at(-1)?.text,
      'DS4 privacy: openai/gpt-4o is remote; may see normal, internal; withheld: sensitive, local-only; secrets redacted.',
    );
    assert.equal(vscode.shownDocuments.at(-1)?.uri, 'ds4-view:/privacy/openai_gpt-4o.md');
    vscode.inputBoxAnswer = 'ollama/qwen3-coder';
    await vscode.commands.get('ds4.client.privacy')?.();
    assert.match(vscode.messages.at(-1)?.text ?? '', /^DS4 privacy: ollama\/qwen3-coder is local; may see normal, internal, sensitive, local-only; withheld: none; secrets not redacted\.$/);
    vscode.inputBoxAnswer = '';
  });

  it('"DS4: Remember..." gives the entry for Pi, offers Supersede on a conflict; "DS4: Pin Selection" and "DS4: Show Memory"', async (t) => {
    const writer = new SessionWriter(join(workDir, 'sessions', 'memory.jsonl'), '0a1b2c3d-e2e-memory');
    writer.turn(1);
    await api.plan({ session: { file: writer.path }, request: 'how many retries?' }); // the session used last
    vscode.inputBoxAnswer = 'retries defaults to 3';
    vscode.quickPick = (items) => items[0]; // project
    vscode.nextMessageChoice = 'Copy Entry';
    const before = vscode.messages.length;
    await vscode.commands.get('ds4.client.remember')?.();
    const said = vscode.messages.slice(before);
    if (said.some((message) => message.kind === 'error' && /not found/i.test(message.text))) {
      t.skip('this ds4-lsp has no ds4/remember yet');
      return;
    }
    assert.match(said[0]?.text ?? '', /^DS4: memory mem-[0-9a-f]{16} prepared, not yet recorded: this is a Pi session and ds4 never writes it\./);
    assert.doesNotMatch(said[0]?.text ?? '', /extension appends it/);
    const copied = vscode.clipboard.at(-1) ?? '{}';
    const entry = JSON.parse(copied) as { type: string; id?: string; parentId?: unknown; timestamp?: unknown; customType: string; data: { operation: string } };
    assert.equal(entry.type, 'custom');
    assert.equal(entry.data.operation, 'add');
    if (typeof entry.id === 'string') {
      assert.equal(typeof entry.parentId, 'string');
      assert.equal(typeof entry.timestamp, 'string');
      // A server that sends the complete line: appended as copied, the server imports it.
      appendFileSync(writer.path, `${copied}\n`);
    } else {
      // An older server: what the Pi extension's appendEntry would write.
      writer.append('custom', { customType: entry.customType, data: entry.data });
    }

    vscode.inputBoxAnswer = 'retries defaults to 5';
    vscode.nextMessageChoice = 'Supersede';
    const conflictAt = vscode.messages.length;
    await vscode.commands.get('ds4.client.remember')?.();
    const answered = vscode.messages.slice(conflictAt);
    assert.equal(answered[0]?.kind, 'warning');
    assert.match(answered[0].text, /conflicts with active memory 'mem-[0-9a-f]{16}'/);
    assert.match(answered[1]?.text ?? '', /prepared, not yet recorded/);

    // The same claim again is a repeat: a server that says so (`data.kind`) gets no Supersede.
    const probe = await api.remember({ session: { file: writer.path }, claim: 'retries defaults to 3' }).then(
      () => undefined,
      (error: unknown) => error as { data?: { kind?: unknown } },
    );
    if (probe?.data?.kind === 'repeat') {
      vscode.inputBoxAnswer = 'retries defaults to 3';
      vscode.nextMessageChoice = 'Supersede';
      const repeatAt = vscode.messages.length;
      await vscode.commands.get('ds4.client.remember')?.();
      const repeated = vscode.messages.slice(repeatAt);
      assert.deepEqual(repeated.map((message) => message.kind), ['warning'], JSON.stringify(repeated));
      vscode.nextMessageChoice = undefined;
    }

    vscode.activeEditor = {
      selection: { isEmpty: false, active: { line: 0 } },
      document: {
        getText: () => 'Keep the public API of api.py stable.',
        lineAt: () => ({ text: '' }),
        uri: { scheme: 'file', fsPath: join(workDir, 'api.py') },
      },
    };
    vscode.nextMessageChoice = 'Copy Entry';
    await vscode.commands.get('ds4.client.pinSelection')?.();
    const pin = JSON.parse(vscode.clipboard.at(-1) ?? '{}') as { customType: string; data: { item: { content: string; scope: string; sourceFile: string } } };
    assert.equal(pin.customType, 'ds4-context-pin-v1');
    assert.equal(pin.data.item.content, 'Keep the public API of api.py stable.');
    assert.equal(pin.data.item.scope, 'session');
    assert.equal(pin.data.item.sourceFile, join(workDir, 'api.py'));
    vscode.activeEditor = undefined;

    vscode.clearWebview();
    await vscode.commands.get('ds4.client.showMemory')?.();
    const html = vscode.webviewHtml() ?? '';
    assert.match(html, /<p class="claim">retries defaults to 3<\/p>/);
    assert.match(html, /href="command:ds4\.client\.memoryAction\?/);
    assert.doesNotMatch(html, /<script/);
    assert.deepEqual((vscode.webviewOptions as { enableCommandUris: unknown }).enableCommandUris, ['ds4.client.memoryAction']);
    vscode.inputBoxAnswer = '';
  });

  it('gives API callers without a Pi session a server-owned session, kept in workspaceState, where writes are appended', async (t) => {
    let opened;
    try {
      opened = await api.sessionOpen();
    } catch (error: unknown) {
      if (/not found/i.test(String(error))) {
        t.skip('this ds4-lsp has no ds4/sessionOpen yet');
        return;
      }
      throw error;
    }
    assert.deepEqual(state.get('ds4.ownedSession'), { sessionId: opened.sessionId, file: opened.file });
    assert.equal((await api.sessionOpen()).file, opened.file);
    const appended = await api.sessionAppend({ messages: [{ role: 'user', content: 'How many retries does the client make?', timestamp: 1764666120000 }] });
    assert.equal(appended.file, opened.file);
    assert.equal(appended.entryIds.length, 1);
    const remembered = await api.remember({ session: { file: opened.file }, claim: 'the retry budget is 4' });
    assert.equal(remembered.appended, true);
    assert.equal(typeof remembered.entryId, 'string');
    const listed = await api.memory({ session: { file: opened.file } });
    assert.ok(listed.memory.some((item) => item.id === remembered.itemId), JSON.stringify(listed));
  });

  it('restarts the server when a launch setting changes, and reports a command it cannot start', async () => {
    vscode.settings.set('server.command', join(workDir, 'no-such-ds4-lsp'));
    vscode.configurationChanged.fire({ affectsConfiguration: (section) => section === 'ds4' });
    await waitFor(() => vscode.statusTexts.at(-1) === '$(error) DS4 error');
    assert.match(vscode.statusTooltip, /cannot start '.*no-such-ds4-lsp': not found/);
    await assert.rejects(api.retrieve({}), /not found/);

    vscode.settings.set('server.command', SERVER_COMMAND);
    vscode.configurationChanged.fire({ affectsConfiguration: (section) => section === 'ds4' });
    await waitFor(() => vscode.statusTexts.at(-1) === '$(database) DS4 ready');
    const result = await api.retrieve({ session: { file: sessionFile }, query: 'theme' });
    assert.equal(result.status, 'ok');
  });
});

/** Resolves once `condition()` holds, polling every 20 ms; the suite timeout bounds it. */
async function waitFor(condition: () => boolean): Promise<void> {
  while (!condition()) {
    await new Promise((resolveSoon) => setTimeout(resolveSoon, 20));
  }
}

/** `find()`'s first defined answer, polling every 20 ms for at most 10 s. */
async function waitUntil<T>(find: () => T | undefined): Promise<T> {
  for (let waited = 0; waited < 10_000; waited += 20) {
    const found = find();
    if (found !== undefined) {
      return found;
    }
    await new Promise((resolveSoon) => setTimeout(resolveSoon, 20));
  }
  throw new Error('timed out after 10 s');
}
