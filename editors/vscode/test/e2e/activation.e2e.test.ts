/**
 * The compiled extension, activated against a stub `vscode` module (`vscodeStub.ts`) and the
 * real `ds4-lsp`, started by vscode-languageclient itself: the API, the palette commands, the
 * status bar, the manifest webview, the history tool, a trust grant, a launch setting change
 * and deactivation. The server is `$DS4_LSP_COMMAND`, default `../../.venv/bin/ds4-lsp`.
 */

import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';

import type { Ds4Api } from '../../src/api';
import type { PlanResult } from '../../src/protocol';
import { StubVscode } from './vscodeStub';

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
  const plans: PlanResult[] = [];

  before(async () => {
    assert.ok(existsSync(SERVER_COMMAND), `ds4-lsp not found at ${SERVER_COMMAND}: set DS4_LSP_COMMAND`);
    workDir = mkdtempSync(join(tmpdir(), 'ds4-vscode-activation-'));
    mkdirSync(join(workDir, 'sessions'));
    sessionFile = join(workDir, 'sessions', 'pi-mono-v1-large-session.jsonl');
    copyFileSync(SESSION_SOURCE, sessionFile);
    vscode.settings.set('server.command', SERVER_COMMAND);
    vscode.settings.set('databasePath', join(workDir, 'db', 'context.db'));
    vscode.settings.set('retrieval.maxResults', 3);
    vscode.install();
    extension = await import('../../src/extension.js');
    const state = new Map<string, unknown>();
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
      'ds4.client.health',
      'ds4.client.plan',
      'ds4.client.rebuildIndex',
      'ds4.client.restartServer',
      'ds4.client.showManifest',
      'ds4.client.showOutput',
    ]);
    assert.deepEqual([...vscode.tools.keys()], ['ds4_retrieve_history']);
    await api.retrieve({ query: 'warm-up' }); // waits for the server
    assert.equal(vscode.statusTexts.at(-1), '$(shield) DS4 untrusted');
    assert.ok(vscode.statusTexts.includes('$(sync~spin) DS4 starting'));
    assert.ok(vscode.outputLines.some((line) => line.startsWith(`info DS4: starting ${SERVER_COMMAND}`)));
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
