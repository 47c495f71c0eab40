import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { compactionEntryJson, describeSummaries, renderCompactResult, renderSummaries } from '../../src/compactionView';
import { checkCompactResult, checkSummariesResult, checkSummarizeParams } from '../../src/protocol';
import { compactResult, summariesResult, summarizeParams } from '../fixtures';

describe('compaction views', () => {
  it('shows the span, node ids, validation, summarizer and summary, and says nothing was written', () => {
    const text = renderCompactResult(compactResult(), { sessionFile: '/s/session.jsonl' });
    assert.match(text, /^# DS4 compaction s-00112233445566aa\n/);
    assert.match(text, /\*\*Not written to the session\.\*\* ds4 has not written anything to the session file\. The agent \(Pi\) must append/);
    assert.ok(text.includes('| Session | `/s/session.jsonl` |'));
    assert.ok(text.includes('| Root (new active root) | `s-00112233445566aa`: aggregate, graph level 1 |'));
    assert.ok(text.includes('| Segment | `s-00112233445566bb` |'));
    assert.ok(text.includes('| Previous root | `s-0011223344556699` |'));
    assert.ok(text.includes('| Summarizer | client (copilot/gpt-4o) |'));
    assert.ok(text.includes('| Fallback reason | — |'));
    assert.ok(text.includes('| Validation | valid; issues before repairs: none; repairs: none |'));
    assert.ok(text.includes('| Span | 9 messages, 812 tokens summarized (9 entries) |'));
    assert.ok(text.includes('| First kept entry | `00000011` (210 tokens kept verbatim) |'));
    assert.ok(text.includes('| Summary size | 180 of 4,000 tokens |'));
    // The summary comes last, as written; embedded node texts are shortened in the details.
    assert.ok(text.endsWith(`${compactResult().compaction.summary.trimEnd()}\n`));
    assert.match(text, /"content": "\(\d+ characters\)"/);
  });

  it('shows why the offline summarizer was used', () => {
    const text = renderCompactResult(
      compactResult({
        summarizer: 'offline',
        fallbackReason: 'the client answered ds4/summarize with error -32803: no chat model | none',
        validation: { status: 'valid', issueCodes: ['missing-section'], repairs: ['files-overwritten'] },
        segmentSummaryId: 's-00112233445566aa',
        span: { ...compactResult().span, previousSummaryId: null, isSplitTurn: true },
        warnings: ['the cut splits a turn'],
      }),
    );
    assert.ok(text.includes('| Fallback reason | the client answered ds4/summarize with error -32803: no chat model \\| none |'));
    assert.ok(text.includes('| Validation | valid; issues before repairs: missing-section; repairs: files-overwritten |'));
    assert.ok(text.includes('| Segment | the root itself (no previous root) |'));
    assert.ok(text.includes('| Previous root | none (first compaction of this branch) |'));
    assert.ok(text.includes('; the cut splits a turn |'));
    assert.ok(text.includes('## Warnings\n\n- the cut splits a turn\n'));
  });

  it('gives the compaction entry as one JSON line in Pi’s shape', () => {
    const result = compactResult();
    const entry = JSON.parse(compactionEntryJson(result)) as Record<string, unknown>;
    assert.deepEqual(entry, {
      type: 'compaction',
      summary: result.compaction.summary,
      firstKeptEntryId: '00000011',
      tokensBefore: 1234,
      details: result.compaction.details,
    });
    assert.ok(!compactionEntryJson(result).includes('\n'));
  });

  it('renders the summary graph as a header and the server’s tree', () => {
    const text = renderSummaries(summariesResult());
    assert.ok(text.startsWith('DS4 summary graph of session 0a1b2c3d-sess\nfile: /home/me/sessions/s.jsonl\nleaf: 00000020\n'));
    assert.ok(text.includes('active root: s-00112233445566aa\nnodes: 1 (committed 1, prepared 0, failed 0); roots: 1\n'));
    assert.ok(text.includes('* s-00112233445566aa segment L0 committed valid 180 tok (active root)'));
    assert.equal(describeSummaries(summariesResult()), 'DS4: 1 summary node(s) in session 0a1b2c3d-sess, active root s-00112233445566aa.');
    assert.equal(
      describeSummaries(summariesResult({ activeRootId: null, nodes: [], counts: { nodes: 0 } })),
      'DS4: 0 summary node(s) in session 0a1b2c3d-sess, no active root.',
    );
  });

  it('checks the compaction shapes', () => {
    assert.deepEqual(checkCompactResult(compactResult()), []);
    assert.deepEqual(checkCompactResult({ ...compactResult(), summarizer: 'model', span: {} }), ['result.summarizer', 'result.span']);
    assert.deepEqual(checkSummariesResult(summariesResult({ dot: 'digraph summaries {}' })), []);
    assert.deepEqual(checkSummariesResult({ ...summariesResult(), tree: null }), ['result.tree']);
    assert.deepEqual(checkSummarizeParams(summarizeParams()), []);
    assert.deepEqual(checkSummarizeParams({ ...summarizeParams(), sourceEntryIds: [1] }), ['params.sourceEntryIds']);
  });
});
