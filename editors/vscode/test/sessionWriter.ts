/**
 * Writes synthetic Pi v3 session files for the end-to-end tests, the way Pi grows them: a
 * header line, then one entry per line linked to the current leaf by `parentId`, with 8-hex
 * ids from a counter; `compaction()` appends the entry a `ds4/compact` result asks for.
 */

import { appendFileSync, writeFileSync } from 'node:fs';

import type { CompactResult } from '../src/protocol';

type ToolCall = [id: string, name: string, args: Record<string, unknown>];

export class SessionWriter {
  leaf: string | null = null;
  private next = 0;
  private minute = 0;

  constructor(
    readonly path: string,
    readonly sessionId = '0a1b2c3d-e2e-sess',
    cwd = '/home/me/demo',
  ) {
    writeFileSync(
      path,
      `${JSON.stringify({ type: 'session', version: 3, id: sessionId, timestamp: '2026-11-01T09:00:00.000Z', cwd })}\n`,
    );
  }

  /** Append one entry under the leaf; returns its id (the new leaf). */
  append(type: string, data: Record<string, unknown>): string {
    this.next += 1;
    this.minute += 1;
    const id = this.next.toString(16).padStart(8, '0');
    const timestamp = `2026-11-01T${String(9 + Math.floor(this.minute / 60)).padStart(2, '0')}:${String(this.minute % 60).padStart(2, '0')}:00.000Z`;
    appendFileSync(this.path, `${JSON.stringify({ type, id, parentId: this.leaf, timestamp, ...data })}\n`);
    this.leaf = id;
    return id;
  }

  user(text: string): string {
    return this.append('message', { message: { role: 'user', content: text, timestamp: 1 } });
  }

  assistant(text: string, calls: ToolCall[] = []): string {
    const content: Record<string, unknown>[] = text ? [{ type: 'text', text }] : [];
    for (const [id, name, args] of calls) {
      content.push({ type: 'toolCall', id, name, arguments: args });
    }
    return this.append('message', {
      message: {
        role: 'assistant',
        content,
        provider: 'anthropic',
        model: 'claude-sonnet-4-5',
        stopReason: calls.length > 0 ? 'toolUse' : 'stop',
        timestamp: 2,
      },
    });
  }

  toolResult(callId: string, name: string, text: string, isError = false): string {
    return this.append('message', {
      message: { role: 'toolResult', toolCallId: callId, toolName: name, content: [{ type: 'text', text }], isError, timestamp: 3 },
    });
  }

  /** A turn: a request, a read, an edit, a test run, a reply. Returns the user message's id. */
  turn(n: number, topic = 'parser'): string {
    const file = `src/${topic}_${String(n)}.py`;
    const first = this.user(`Step ${String(n)}: fix the ${topic} bug in \`${file}\`; keep the API stable.`);
    this.assistant('Reading the file.', [[`r${String(n)}`, 'read', { path: file }]]);
    this.toolResult(`r${String(n)}`, 'read', `def ${topic}_${String(n)}(value):\n    return value  # TODO`);
    this.assistant('Editing.', [[`e${String(n)}`, 'edit', { path: file, oldText: 'return value', newText: 'return value.strip()' }]]);
    this.toolResult(`e${String(n)}`, 'edit', 'Edited 1 location.');
    this.assistant('Running tests.', [[`b${String(n)}`, 'bash', { command: `pytest tests/test_${topic}_${String(n)}.py -q` }]]);
    this.toolResult(`b${String(n)}`, 'bash', `1 passed in 0.0${String(n % 10)}s`);
    this.assistant(`Fixed \`${topic}_${String(n)}\`: it strips whitespace now. All tests pass.`);
    return first;
  }

  /** Append the compaction entry of a `ds4/compact` result, as Pi would. */
  compaction(result: CompactResult): string {
    const { summary, firstKeptEntryId, tokensBefore, details } = result.compaction;
    return this.append('compaction', { summary, firstKeptEntryId, tokensBefore, details, fromHook: true });
  }
}
