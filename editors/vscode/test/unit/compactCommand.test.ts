/**
 * "DS4: Compact Session" (`ds4.client.compact`) run through `registerCommands` against the stub
 * `vscode` module (`../e2e/vscodeStub.ts`) and a fake compaction: the result opens rendered in
 * the Markdown preview, and as Markdown source only when the preview command is missing.
 */

import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';

import type { CommandContext } from '../../src/commands';
import { markdownLiteral } from '../../src/compactionView';
import type { CompactParams } from '../../src/protocol';
import { StubVscode } from '../e2e/vscodeStub';
import { compactResult } from '../fixtures';

const PREVIEW = 'markdown.showPreviewToSide';

describe('"DS4: Compact Session" shows its result', () => {
  const vscode = new StubVscode();
  const asked: CompactParams[] = [];
  const result = compactResult();
  const uri = `ds4-view:/compaction/${result.summaryId}.md`;
  let run: () => Promise<void>;

  before(async () => {
    vscode.install();
    const { registerCommands } = await import('../../src/commands.js');
    const { ReadOnlyDocuments } = await import('../../src/readOnlyDocuments.js');
    const state = new Map<string, unknown>();
    const context = {
      output: { error: () => undefined, info: () => undefined, show: () => undefined },
      workspaceState: {
        get: (key: string) => state.get(key),
        update: (key: string, value: unknown) => Promise.resolve(void state.set(key, value)),
      },
      documents: new ReadOnlyDocuments(),
      compact: (params: CompactParams) => {
        asked.push(params);
        return Promise.resolve(result);
      },
      lastCompaction: () => result,
    } as unknown as CommandContext;
    registerCommands(context);
    const command = vscode.commands.get('ds4.client.compact');
    assert.ok(command, 'the command is registered');
    vscode.openDialogAnswer = '/sessions/a.jsonl';
    vscode.inputBoxAnswer = '';
    run = async () => {
      await command();
      await new Promise((resolve) => setImmediate(resolve));
    };
  });

  it('rendered in the Markdown preview beside the editor, not as source', async () => {
    await run();
    assert.deepEqual(asked.at(-1), { session: { file: '/sessions/a.jsonl' }, reason: 'manual' });
    const call = vscode.executedCommands.filter((each) => each.command === PREVIEW).at(-1);
    assert.equal(call?.argument, uri);
    assert.ok(call.text?.startsWith(`# DS4 compaction ${markdownLiteral(result.summaryId)}\n`), call.text);
    assert.ok(call.text?.includes('| Summarizer |'), 'the document the preview renders is the Markdown result');
    assert.deepEqual(vscode.shownDocuments, [], 'no source editor opened');
    assert.match(vscode.messages.at(-1)?.text ?? '', /^DS4: summary s-\S+ prepared/);
  });

  it('as read-only Markdown source when the preview command is missing', async () => {
    vscode.missingCommands.add(PREVIEW);
    await run();
    const shown = vscode.shownDocuments.at(-1);
    assert.equal(shown?.uri, uri);
    assert.equal(shown.languageId, 'markdown');
    assert.ok(shown.text.includes(`# DS4 compaction ${markdownLiteral(result.summaryId)}`));
  });
});
