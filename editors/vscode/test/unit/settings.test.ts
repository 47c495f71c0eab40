import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import {
  buildConfigurationChange,
  buildInitializationOptions,
  CLIENT_SETTING_KEYS,
  compactionDestination,
  DEFAULT_HISTORY_TOOL_PROVIDER,
  expandPath,
  historyToolDestination,
  LAUNCH_SETTING_KEYS,
  launchKey,
  readServerSettings,
  resolveServerLaunch,
  SERVER_SETTING_KEYS,
  serverStartFailure,
} from '../../src/settings';
import { reader } from '../fixtures';

const PACKAGE_ROOT = join(__dirname, '..', '..', '..');
const PATHS = { homeDir: '/home/me', workspaceFolder: '/srv/proj' };

interface ConfigurationProperty {
  default: unknown;
  type: string;
  scope?: string;
  markdownDescription?: string;
}
const packageJson = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as {
  contributes: { configuration: { properties: Record<string, ConfigurationProperty> } };
  capabilities: { untrustedWorkspaces: { supported: string; restrictedConfigurations: string[] } };
};
const properties = packageJson.contributes.configuration.properties;
/** What VS Code's `getConfiguration('ds4')` returns with no user settings: the defaults. */
const defaults = reader(
  Object.fromEntries(Object.entries(properties).map(([key, property]) => [key.replace(/^ds4\./, ''), property.default])),
);

describe('settings mapping', () => {
  it('sends every server setting, nested, and none of the client launch settings', () => {
    const settings = readServerSettings(defaults);
    assert.deepEqual(settings.context, {
      mode: 'managed',
      targetFillRatio: 0.7,
      softLimitRatio: 0.8,
      hardLimitRatio: 0.9,
      minimumOutputReserve: 8192,
      preferredOutputReserve: 32768,
      recentTailTokens: 64000,
      rescueImmediatePredecessor: true,
      maxRetrievedHistoryTokens: 16000,
      maxProjectTokens: 20000,
      maxSummaryTokens: 12000,
      maxPinnedTokens: 16000,
      maxMemoryTokens: 8000,
    });
    assert.deepEqual(settings.retrieval, { exact: true, fts: true, maxResults: 12 });
    assert.deepEqual(settings.artifacts, {
      enabled: true,
      maxInlineToolResultChars: 12000,
      excerptChars: 6000,
      maxArtifactBytes: 100000000,
      maxSearchBytes: 50000000,
      maxSearchMatches: 12,
    });
    assert.deepEqual(settings.memory, { enabled: true, maxPinChars: 4000, maxClaimChars: 2000, maxResults: 12 });
    assert.deepEqual(settings.project, {
      enabled: true,
      maxFiles: 10000,
      maxFileBytes: 512000,
      maxTotalBytes: 50000000,
      maxResults: 8,
      maxCommits: 5000,
    });
    assert.deepEqual(settings.compaction, {
      enabled: true,
      keepRecentTokens: 20000,
      summaryTokenLimit: 4000,
      maxRequestInputTokens: 64000,
      summarizeTimeoutMs: 120000,
    });
    assert.deepEqual(settings.modelAwareness, {
      enabled: true,
      overrides: {},
      calibrationWindow: 24,
      minimumCalibrationSamples: 3,
      calibrationRatioLowerBound: 0.5,
      calibrationRatioUpperBound: 2,
    });
    assert.deepEqual(settings.diagnostics, { storeContextManifest: true, logLevel: 'info' });
    assert.deepEqual(settings.storage, { busyTimeoutMs: 5000 });
    assert.deepEqual(settings.privacy, {
      enabled: true,
      defaultClassification: 'normal',
      localProviders: ['faux', 'ollama', 'llama-cpp', 'lmstudio'],
      remoteDefaultAllowed: ['normal', 'internal'],
      remoteProviders: {},
      redactSecrets: true,
    });
    assert.equal(settings.enabled, true);
    assert.equal(settings.server, undefined);
    assert.equal(settings.databasePath, undefined);
  });

  it('passes user values through as plain JSON, including override objects', () => {
    const overrides = { 'local/qwen3-coder': { contextWindow: 32768, maxOutputTokens: 8192 } };
    const frozen = Object.freeze({ ...overrides });
    const settings = readServerSettings(reader({ 'context.mode': 'observer', 'modelAwareness.overrides': frozen }));
    assert.deepEqual(settings, { context: { mode: 'observer' }, modelAwareness: { overrides } });
    assert.ok(!Object.isFrozen((settings.modelAwareness as Record<string, unknown>).overrides));
  });

  it('forwards the project settings a user changes, nested under project', () => {
    const settings = readServerSettings(
      reader({ 'project.enabled': false, 'project.maxFiles': 500, 'project.maxFileBytes': 1000, 'project.maxTotalBytes': 2000, 'project.maxResults': 3, 'context.maxProjectTokens': 4000 }),
    );
    assert.deepEqual(settings, {
      project: { enabled: false, maxFiles: 500, maxFileBytes: 1000, maxTotalBytes: 2000, maxResults: 3 },
      context: { maxProjectTokens: 4000 },
    });
    const change = buildConfigurationChange(true, reader({ 'project.enabled': false }));
    assert.deepEqual(change, { settings: { ds4: { project: { enabled: false }, trusted: true } } });
    for (const key of ['project.enabled', 'project.maxFiles', 'project.maxFileBytes', 'project.maxTotalBytes', 'project.maxResults', 'context.maxProjectTokens']) {
      assert.ok(SERVER_SETTING_KEYS.includes(key), key);
      assert.ok(properties[`ds4.${key}`], `package.json contributes ds4.${key}`);
    }
  });

  it('forwards the native continuation settings, nested under nativeContinuation', () => {
    const values = {
      'nativeContinuation.enabled': true,
      'nativeContinuation.allowProviderStorage': true,
      'nativeContinuation.profiles': ['openai/gpt-5'],
      'nativeContinuation.maxStateAgeMs': 60000,
      'nativeContinuation.retryManagedReplay': false,
    };
    assert.deepEqual(readServerSettings(reader(values)), {
      nativeContinuation: {
        enabled: true,
        allowProviderStorage: true,
        profiles: ['openai/gpt-5'],
        maxStateAgeMs: 60000,
        retryManagedReplay: false,
      },
    });
    for (const key of Object.keys(values)) {
      assert.ok(SERVER_SETTING_KEYS.includes(key), key);
      assert.ok(properties[`ds4.${key}`], `package.json contributes ds4.${key}`);
    }
  });

  it('forwards the privacy settings a user changes, nested under privacy, at start and on change', () => {
    const remoteProviders = Object.freeze({ 'azure-openai': ['normal', 'internal', 'sensitive'] });
    const values = {
      'privacy.enabled': true,
      'privacy.defaultClassification': 'internal',
      'privacy.localProviders': ['ollama', 'my-gpu-box'],
      'privacy.remoteDefaultAllowed': ['normal'],
      'privacy.remoteProviders': remoteProviders,
      'privacy.redactSecrets': false,
      'privacy.historyToolProvider': 'ollama',
    };
    const privacy = {
      enabled: true,
      defaultClassification: 'internal',
      localProviders: ['ollama', 'my-gpu-box'],
      remoteDefaultAllowed: ['normal'],
      remoteProviders: { 'azure-openai': ['normal', 'internal', 'sensitive'] },
      redactSecrets: false,
    };
    assert.deepEqual(readServerSettings(reader(values)), { privacy });
    assert.deepEqual(buildInitializationOptions(true, reader(values), PATHS), { trusted: true, settings: { privacy } });
    assert.deepEqual(buildConfigurationChange(false, reader({ 'privacy.enabled': false })), {
      settings: { ds4: { privacy: { enabled: false }, trusted: false } },
    });
    // Only what is set is sent: an unset key is left to the server's default.
    assert.deepEqual(readServerSettings(reader({ 'privacy.redactSecrets': true })), { privacy: { redactSecrets: true } });
    for (const key of Object.keys(privacy)) {
      assert.ok(SERVER_SETTING_KEYS.includes(`privacy.${key}`), key);
    }
  });

  it('names the #ds4History destination: ds4.privacy.historyToolProvider, else vscode-lm (remote)', () => {
    assert.equal(DEFAULT_HISTORY_TOOL_PROVIDER, 'vscode-lm');
    assert.deepEqual(historyToolDestination(reader({})), { provider: 'vscode-lm' });
    assert.deepEqual(historyToolDestination(reader({ 'privacy.historyToolProvider': ' ollama ' })), { provider: 'ollama' });
    for (const value of ['', '   ', 3, null]) {
      assert.deepEqual(historyToolDestination(reader({ 'privacy.historyToolProvider': value })), { provider: 'vscode-lm' }, String(value));
    }
    const setting = properties['ds4.privacy.historyToolProvider'];
    assert.ok(setting);
    assert.equal(setting.default, 'vscode-lm');
    assert.match(setting.markdownDescription ?? '', /remote/);
    assert.ok(CLIENT_SETTING_KEYS.includes('privacy.historyToolProvider'));
    assert.ok(!SERVER_SETTING_KEYS.includes('privacy.historyToolProvider'));
  });

  it('names VS Code chat models as the destination of compaction prompts while they write them', () => {
    assert.deepEqual(compactionDestination(reader({})), { provider: 'vscode-lm' });
    assert.deepEqual(compactionDestination(reader({ 'compaction.useEditorModel': true })), { provider: 'vscode-lm' });
    assert.equal(compactionDestination(reader({ 'compaction.useEditorModel': false })), undefined);
  });

  it('builds initializationOptions with trust, settings and an expanded database path', () => {
    const options = buildInitializationOptions(false, reader({ databasePath: '~/db/context.db', 'retrieval.maxResults': 5 }), PATHS);
    assert.deepEqual(options, {
      trusted: false,
      settings: { retrieval: { maxResults: 5 } },
      databasePath: '/home/me/db/context.db',
    });
    assert.equal('databasePath' in buildInitializationOptions(true, reader({ databasePath: '  ' }), PATHS), false);
  });

  it('reports trust beside the settings on a configuration change', () => {
    assert.deepEqual(buildConfigurationChange(true, reader({ 'context.mode': 'observer' })), {
      settings: { ds4: { context: { mode: 'observer' }, trusted: true } },
    });
  });

  it('starts ds4-lsp by default and <python> -m ds4_lsp when a Python is set, never with --stdio', () => {
    assert.deepEqual(resolveServerLaunch(reader({}), PATHS), { command: 'ds4-lsp', args: [] });
    assert.deepEqual(resolveServerLaunch(reader({ 'server.command': '${workspaceFolder}/.venv/bin/ds4-lsp', 'server.args': ['--log-level', 'debug'] }), PATHS), {
      command: '/srv/proj/.venv/bin/ds4-lsp',
      args: ['--log-level', 'debug'],
    });
    assert.deepEqual(
      resolveServerLaunch(reader({ 'server.command': 'ignored', 'server.pythonPath': '~/venv/bin/python', 'server.args': ['--log-level', 'info', 3] }), PATHS),
      { command: '/home/me/venv/bin/python', args: ['-m', 'ds4_lsp', '--log-level', 'info'] },
    );
  });

  it('asks for a restart only when the launch command, the database or the editor model offer changes', () => {
    const base = { 'server.command': 'ds4-lsp', 'context.mode': 'managed' };
    const key = launchKey(reader(base), PATHS);
    assert.equal(launchKey(reader({ ...base, 'context.mode': 'observer' }), PATHS), key);
    assert.equal(launchKey(reader({ ...base, 'compaction.modelFamily': 'gpt-4o' }), PATHS), key);
    assert.equal(launchKey(reader({ ...base, 'compaction.useEditorModel': true }), PATHS), key, 'on is the default');
    assert.notEqual(launchKey(reader({ ...base, 'compaction.useEditorModel': false }), PATHS), key);
    assert.notEqual(launchKey(reader({ ...base, 'server.command': '/opt/ds4-lsp' }), PATHS), key);
    assert.notEqual(launchKey(reader({ ...base, databasePath: '/tmp/x.db' }), PATHS), key);
    assert.notEqual(launchKey(reader({ ...base, 'server.args': ['--log-level', 'debug'] }), PATHS), key);
  });

  it('expands ~, ${userHome} and ${workspaceFolder}, and leaves an unknown folder visible', () => {
    assert.equal(expandPath('~', PATHS), '/home/me');
    assert.equal(expandPath('${userHome}/a', PATHS), '/home/me/a');
    assert.equal(expandPath('${workspaceFolder}/b', { homeDir: '/h' }), '${workspaceFolder}/b');
    assert.equal(expandPath('/x/~/y', PATHS), '/x/~/y');
  });
});

describe('package.json settings', () => {
  it('contributes exactly the server settings plus the launch and client settings', () => {
    const expected = [...SERVER_SETTING_KEYS, ...LAUNCH_SETTING_KEYS, ...CLIENT_SETTING_KEYS].map((key) => `ds4.${key}`).sort();
    assert.deepEqual(Object.keys(properties).sort(), expected);
  });

  it('never sends the client settings to the server', () => {
    const settings = readServerSettings(
      reader({ 'compaction.useEditorModel': false, 'compaction.modelFamily': 'gpt-4o', 'compaction.enabled': true, 'privacy.historyToolProvider': 'ollama' }),
    );
    assert.deepEqual(settings, { compaction: { enabled: true } });
    assert.equal(properties['ds4.compaction.useEditorModel']?.default, true);
    assert.equal(properties['ds4.compaction.modelFamily']?.default, '');
  });

  it('offers the four privacy levels, and never local-only to remote providers', () => {
    const schema = packageJson.contributes.configuration.properties as unknown as Record<string, { enum?: string[]; items?: { enum?: string[] }; additionalProperties?: { items?: { enum?: string[] } } }>;
    assert.deepEqual(schema['ds4.privacy.defaultClassification']?.enum, ['normal', 'internal', 'sensitive', 'local-only']);
    assert.deepEqual(schema['ds4.privacy.remoteDefaultAllowed']?.items?.enum, ['normal', 'internal', 'sensitive']);
    assert.deepEqual(schema['ds4.privacy.remoteProviders']?.additionalProperties?.items?.enum, ['normal', 'internal', 'sensitive']);
  });

  it('restricts the launch settings in untrusted workspaces (a workspace must not pick the command)', () => {
    const trust = packageJson.capabilities.untrustedWorkspaces;
    assert.equal(trust.supported, 'limited');
    assert.deepEqual([...trust.restrictedConfigurations].sort(), LAUNCH_SETTING_KEYS.map((key) => `ds4.${key}`).sort());
  });

  it('has the server defaults of docs/configuration.md', (t) => {
    let doc: string;
    try {
      doc = readFileSync(join(PACKAGE_ROOT, '..', '..', 'docs', 'configuration.md'), 'utf8');
    } catch {
      t.skip('docs/configuration.md is not next to this checkout');
      return;
    }
    const documented = new Map<string, unknown>();
    for (const match of doc.matchAll(/^\| `([\w.]+)` \| `([^`]*)` \|/gm)) {
      documented.set(match[1] ?? '', JSON.parse(match[2] ?? '') as unknown);
    }
    for (const key of SERVER_SETTING_KEYS) {
      assert.ok(documented.has(key), `${key} is documented`);
      assert.deepEqual(properties[`ds4.${key}`]?.default, documented.get(key), key);
    }
  });
});

describe('server start failures', () => {
  const enoent = Object.assign(new Error('spawn /opt/ds4/bin/ds4-lsp ENOENT'), { code: 'ENOENT' });

  it('says how to install the server when the command does not exist', () => {
    const text = serverStartFailure('/opt/ds4/bin/ds4-lsp', enoent);
    assert.match(text, /^cannot start '\/opt\/ds4\/bin\/ds4-lsp': not found\. Install ds4-lsp/);
    assert.match(text, /"ds4\.server\.command"/);
    assert.doesNotMatch(text, /pip install ds4-lsp/); // it is not on PyPI
    assert.doesNotMatch(text, /remote/i);
  });

  it('in a remote window, says the launch settings of the local User settings are ignored there', () => {
    const text = serverStartFailure('ds4-lsp', enoent, 'ssh-remote');
    assert.match(text, /remote window \(ssh-remote\)/);
    for (const key of LAUNCH_SETTING_KEYS) {
      assert.ok(text.includes(`"ds4.${key}"`), key);
    }
    assert.match(text, /Preferences: Open Remote Settings/);
    assert.match(text, /workspace settings/);
  });

  it('passes other errors through', () => {
    assert.equal(
      serverStartFailure('ds4-lsp', new Error('spawn ds4-lsp EACCES'), 'wsl'),
      "cannot start 'ds4-lsp': spawn ds4-lsp EACCES",
    );
  });

  it('documents, on each machine-overridable launch setting, where it goes in a remote window', () => {
    for (const key of LAUNCH_SETTING_KEYS) {
      const property = properties[`ds4.${key}`];
      assert.ok(property, key);
      assert.equal(property.scope, 'machine-overridable', key);
      assert.match(property.markdownDescription ?? '', /remote window .*Preferences: Open Remote Settings/, key);
    }
  });
});
