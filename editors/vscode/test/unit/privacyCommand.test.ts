/**
 * "DS4: Privacy Policy" (`ds4.client.privacy`) run through `registerCommands` against the stub
 * `vscode` module (`../e2e/vscodeStub.ts`) and a fake server: what it asks, what it sends to
 * `ds4.privacy`, and what it shows.
 */

import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';

import type { CommandContext } from '../../src/commands';
import type { PrivacyParams } from '../../src/protocol';
import { StubVscode } from '../e2e/vscodeStub';
import { planResult, privacyAnswer } from '../fixtures';

describe('"DS4: Privacy Policy"', () => {
  const vscode = new StubVscode();
  const asked: PrivacyParams[] = [];
  let failWith: Error | undefined;
  let lastPlan: ReturnType<typeof planResult> | undefined = planResult();
  let run: () => Promise<void>;

  before(async () => {
    vscode.install();
    const { registerCommands } = await import('../../src/commands.js');
    const { ReadOnlyDocuments } = await import('../../src/readOnlyDocuments.js');
    const requests = {
      privacy: (params: PrivacyParams) => {
        asked.push(params);
        return failWith ? Promise.reject(failWith) : Promise.resolve(privacyAnswer());
      },
    };
    const output = { error: () => undefined, info: () => undefined, show: () => undefined };
    const context = {
      server: { requests: () => Promise.resolve(requests) },
      output,
      documents: new ReadOnlyDocuments(),
      lastPlan: () => lastPlan,
    } as unknown as CommandContext;
    registerCommands(context);
    const command = vscode.commands.get('ds4.client.privacy');
    assert.ok(command, 'the command is registered');
    run = async () => {
      await command();
      // Errors are reported without being awaited: let them land.
      await new Promise((resolve) => setImmediate(resolve));
    };
  });

  it('asks for provider/model, defaulting to the last plan’s model', async () => {
    vscode.inputBoxAnswer = undefined; // cancelled
    await run();
    const options = vscode.inputBoxes.at(-1) as { value: string; validateInput(value: string): string | undefined };
    assert.equal(options.value, 'anthropic/claude-sonnet-4-5');
    assert.match(options.validateInput('open ai') ?? '', /provider\/model/);
    assert.equal(options.validateInput('ollama'), undefined);
    assert.equal(options.validateInput('openai/gpt-4o'), undefined);
    assert.deepEqual(asked, [], 'a cancelled input asks nothing');
    lastPlan = undefined;
    await run();
    assert.equal((vscode.inputBoxes.at(-1) as { value: string }).value, '', 'no plan yet: no default');
  });

  it('sends the destination to ds4.privacy and shows the answer and its explanation', async () => {
    vscode.inputBoxAnswer = ' openai/gpt-4o ';
    await run();
    assert.deepEqual(asked, [{ model: 'openai/gpt-4o' }]);
    assert.equal(
      vscode.messages.at(-1)?.text,
      'DS4 privacy: openai/gpt-4o is remote; may see normal, internal; withheld: sensitive, local-only; secrets redacted.',
    );
    const document = vscode.shownDocuments.at(-1);
    assert.equal(document?.uri, 'ds4-view:/privacy/openai_gpt-4o.md');
    assert.equal(document.languageId, 'markdown');
    assert.ok(document.text.includes(privacyAnswer().explanation));
  });

  it('refuses a malformed destination, and reports a server error', async () => {
    vscode.inputBoxAnswer = 'open ai';
    await run();
    assert.equal(asked.length, 1, 'nothing sent');
    assert.match(vscode.messages.at(-1)?.text ?? '', /^DS4: Give the destination as provider\/model/);
    vscode.inputBoxAnswer = 'openai/gpt-4o';
    failWith = new Error('unknown command ds4.privacy');
    await run();
    assert.deepEqual(vscode.messages.at(-1), { kind: 'error', text: 'DS4: unknown command ds4.privacy' });
  });
});
