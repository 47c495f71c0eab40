import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { HISTORY_TOOL_NAME } from '../../src/historyTool';
import { HEALTH, PRIVACY, REBUILD_INDEX, SUMMARIES } from '../../src/protocol';
import { COMMANDS } from '../../src/status';

const PACKAGE_ROOT = join(__dirname, '..', '..', '..');

interface PackageJson {
  main: string;
  engines: { vscode: string };
  devDependencies: Record<string, string>;
  contributes: {
    commands: { command: string; title: string; category: string }[];
    languageModelTools: { name: string; inputSchema: { properties: Record<string, unknown>; required: string[] } }[];
  };
}
const packageJson = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as PackageJson;

const PURE_MODULES = [
  'protocol',
  'settings',
  'requests',
  'status',
  'manifestView',
  'historyTool',
  'serverLog',
  'sessionFiles',
  'summarize',
  'compactionView',
  'privacyView',
  'usageView',
  'html',
  'memoryView',
  'ownedSession',
  'notices',
];

describe('extension manifest', () => {
  it('puts the DS4 commands in the palette under ids the language client does not take', () => {
    const titles = packageJson.contributes.commands.map((command) => `${command.category}: ${command.title}`);
    for (const title of [
      'DS4: Rebuild Index',
      'DS4: Health',
      'DS4: Show Manifest',
      'DS4: Plan Request',
      'DS4: Compact Session',
      'DS4: Show Summary Graph',
      'DS4: Copy Compaction Entry',
      'DS4: Privacy Policy',
      'DS4: Pin Selection',
      'DS4: Remember...',
      'DS4: Show Memory',
      'DS4: Search Artifacts',
    ]) {
      assert.ok(titles.includes(title), title);
    }
    const ids = packageJson.contributes.commands.map((command) => command.command);
    assert.deepEqual([...ids].sort(), Object.values(COMMANDS).sort());
    // vscode-languageclient registers the server's executeCommandProvider commands itself.
    assert.ok(!ids.includes(REBUILD_INDEX) && !ids.includes(HEALTH) && !ids.includes(SUMMARIES) && !ids.includes(PRIVACY));
  });

  it('declares the history tool with the input the tool reads', () => {
    const tool = packageJson.contributes.languageModelTools[0];
    assert.ok(tool);
    assert.equal(tool.name, HISTORY_TOOL_NAME);
    assert.deepEqual(Object.keys(tool.inputSchema.properties).sort(), ['maxResults', 'query', 'scopes', 'sessionFile']);
    assert.deepEqual(tool.inputSchema.required, ['query']);
  });

  it('targets a VS Code no older than its API types and vscode-languageclient need', () => {
    assert.equal(packageJson.engines.vscode, '^1.95.0');
    assert.equal(packageJson.devDependencies['@types/vscode'], '1.95.0');
    assert.equal(packageJson.main, './out/src/extension.js');
  });

  it('has a README that vsce can package: no relative links (there is no repository URL)', () => {
    const readme = readFileSync(join(PACKAGE_ROOT, 'README.md'), 'utf8');
    assert.deepEqual(readme.match(/\]\((?!https?:|#)[^)]*\)/g) ?? [], []);
  });

  it('keeps vscode out of the pure modules, so they run in plain node', () => {
    for (const name of PURE_MODULES) {
      const compiled = readFileSync(join(PACKAGE_ROOT, 'out', 'src', `${name}.js`), 'utf8');
      assert.doesNotMatch(compiled, /require\("vscode(-languageclient[^"]*)?"\)/, name);
    }
  });

  it('shows every notification through notify.ts, so no server text becomes a command link', () => {
    const sources = join(PACKAGE_ROOT, 'src');
    for (const name of readdirSync(sources).filter((file) => file.endsWith('.ts') && file !== 'notify.ts')) {
      const text = readFileSync(join(sources, name), 'utf8');
      assert.doesNotMatch(text, /\.show(Information|Warning|Error)Message\(/, name);
    }
  });

  it('ships only runtime files: .vscodeignore leaves out build, lint and test files everywhere', () => {
    const rules = readFileSync(join(PACKAGE_ROOT, '.vscodeignore'), 'utf8')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'));
    // Every top-level file is left out except the allow-list (vsce: any `!` match ships).
    assert.ok(rules.includes('*'));
    assert.deepEqual(
      rules.filter((rule) => rule.startsWith('!')).sort(),
      ['!LICENSE', '!README.md', '!out/src/**/*.js', '!package.json'],
    );
    // ... and these also in the dependencies vsce copies from node_modules.
    for (const rule of ['out/**', 'src/**', 'test/**', '**/*.map', '**/*.ts', '**/*.tsbuildinfo', '**/tsconfig*.json', '**/eslint.config.*']) {
      assert.ok(rules.includes(rule), rule);
    }
  });
});
