/**
 * Text views of compaction results for read-only editor documents: a `ds4/compact` result as
 * Markdown ("DS4: Compact Session") and a `ds4.summaries` graph as plain text ("DS4: Show
 * Summary Graph"), plus the compaction entry as the JSON line an agent appends.
 *
 * The Markdown goes to VS Code's Markdown preview, whose markdown-it renders raw HTML and links
 * bare URLs (`markdown.preview.linkify`). Text that is not ours (the model's summary, the
 * server's warnings, reasons, codes and ids) is therefore put in as literal text: the summary
 * and the entry's details in fenced code blocks (`markdownFence`), everything else escaped
 * (`markdownLiteral`, `code`). Nothing from the result becomes HTML, an image or a link.
 *
 * Pure module: no `vscode` import.
 */

import type { CompactResult, SummariesResult } from './protocol';
import { formatInt } from './status';

/** Said wherever a prepared compaction is shown: ds4 itself never writes session files. */
export const NOT_WRITTEN_NOTE =
  'ds4 has not written anything to the session file. The agent (Pi) must append this ' +
  'compaction entry to the session, then report `ds4/compactCommitted` (or `ds4/compactFailed` ' +
  'if it does not). Until then the new summary nodes stay `prepared`; a later sync that finds ' +
  'the entry in the file also commits them.';

/** Context for `renderCompactResult`: the session file that was compacted. */
export interface CompactViewContext {
  sessionFile?: string;
  leafId?: string;
}

/** The `ds4/compact` result as a Markdown document. */
export function renderCompactResult(result: CompactResult, context: CompactViewContext = {}): string {
  const record = engineRecord(result);
  const provider = stringField(record, 'provider');
  const model = stringField(record, 'model');
  const writer =
    provider !== undefined || model !== undefined ? ` (${markdownLiteral(provider ?? '?')}/${markdownLiteral(model ?? '?')})` : '';
  const validation = result.validation;
  const span = result.span;
  // Each value is built from `markdownLiteral`, `code` and our own words: no raw `|`, no line break.
  const rows: [string, string][] = [
    ['Session', context.sessionFile === undefined ? '—' : code(context.sessionFile) + (context.leafId ? ` at leaf ${code(context.leafId)}` : '')],
    ['Root (new active root)', `${code(result.summaryId)}: ${markdownLiteral(result.summaryKind)}, graph level ${markdownLiteral(String(result.graphLevel))}`],
    ['Segment', result.segmentSummaryId === result.summaryId ? 'the root itself (no previous root)' : code(result.segmentSummaryId)],
    ['Previous root', span.previousSummaryId ? code(span.previousSummaryId) : 'none (first compaction of this branch)'],
    ['Summarizer', `${markdownLiteral(result.summarizer)}${writer}`],
    ['Fallback reason', result.fallbackReason ? markdownLiteral(result.fallbackReason) : '—'],
    [
      'Validation',
      `${markdownLiteral(validation.status)}; issues before repairs: ${list(validation.issueCodes)}; repairs: ${list(validation.repairs)}`,
    ],
    [
      'Span',
      `${formatInt(span.messageCount)} messages, ${formatInt(span.tokens)} tokens summarized` +
        (span.sourceEntryCount === undefined ? '' : ` (${formatInt(span.sourceEntryCount)} entries)`) +
        (span.isSplitTurn ? '; the cut splits a turn' : ''),
    ],
    [
      'First kept entry',
      (span.firstKeptEntryId ? code(span.firstKeptEntryId) : '—') +
        (span.keptTokens === undefined ? '' : ` (${formatInt(span.keptTokens)} tokens kept verbatim)`),
    ],
    ['Tokens before', formatInt(result.compaction.tokensBefore)],
  ];
  if (result.tokens) {
    rows.push(['Summary size', `${formatInt(result.tokens.summary)} of ${formatInt(result.tokens.limit)} tokens`]);
  }
  if (result.operationId !== undefined) {
    rows.push(['Operation', code(result.operationId)]);
  }
  const lines = [
    `# DS4 compaction ${markdownLiteral(result.summaryId)}`,
    '',
    `> **Not written to the session.** ${NOT_WRITTEN_NOTE}`,
    '',
    '| | |',
    '|---|---|',
    ...rows.map(([name, value]) => `| ${name} | ${value} |`),
    '',
  ];
  if (result.warnings.length > 0) {
    lines.push('## Warnings', '', ...result.warnings.map((warning) => `- ${markdownLiteral(warning)}`), '');
  }
  const details = elideEmbeddedContent(result.compaction.details);
  lines.push(
    '## Compaction entry details',
    '',
    'The `details` the entry carries (embedded node texts shortened here; "DS4: Copy Compaction Entry" copies the full entry):',
    '',
    markdownFence(JSON.stringify(details, null, 2), 'json'),
    '',
    '# Summary',
    '',
    'The text of the compaction entry (the new root; what the model will see), shown literally:',
    '',
    markdownFence(result.compaction.summary.trimEnd(), 'text'),
    '',
  );
  return lines.join('\n');
}

/**
 * The compaction entry as one JSONL line in Pi's shape (`type: "compaction"`, without `id`,
 * `parentId` and `timestamp`, which the writer adds).
 */
export function compactionEntryJson(result: CompactResult): string {
  return JSON.stringify({
    type: 'compaction',
    summary: result.compaction.summary,
    firstKeptEntryId: result.compaction.firstKeptEntryId,
    tokensBefore: result.compaction.tokensBefore,
    details: result.compaction.details,
  });
}

/**
 * One-line description of a `ds4/compact` result, for a notification. VS Code turns
 * `[label](https:…|command:…|file:…)` in a notification into a link that runs on a click, so
 * the server's text in it (the fallback reason, ids, status) goes through `unlinked`.
 */
export function describeCompactResult(result: CompactResult): string {
  const how =
    result.summarizer === 'client'
      ? 'written by the editor model'
      : `written offline${result.fallbackReason ? ` (${unlinked(result.fallbackReason)})` : ''}`;
  return (
    `DS4: summary ${unlinked(result.summaryId)} prepared, ${how}, validation ${unlinked(result.validation.status)}. ` +
    'The agent (Pi) must append the compaction entry; ds4 never writes the session file.'
  );
}

/** A `ds4.summaries` answer as a plain-text document: a header, then the server's tree. */
export function renderSummaries(result: SummariesResult): string {
  const counts = result.counts;
  const count = (key: string): string => formatInt(counts[key] ?? 0);
  const lines = [
    `DS4 summary graph of session ${result.sessionId}`,
    ...(result.sessionFile ? [`file: ${result.sessionFile}`] : []),
    ...(result.leafId ? [`leaf: ${result.leafId}`] : []),
    `active root: ${result.activeRootId ?? 'none'}`,
    `nodes: ${count('nodes')} (committed ${count('committed')}, prepared ${count('prepared')}, failed ${count('failed')}); roots: ${count('roots')}`,
    '',
    result.tree,
    '',
  ];
  return lines.join('\n');
}

/** One-line description of a summary graph, for a notification. */
export function describeSummaries(result: SummariesResult): string {
  const nodes = result.counts.nodes ?? result.nodes.length;
  return (
    `DS4: ${formatInt(nodes)} summary node(s) in session ${result.sessionId}` +
    (result.activeRootId ? `, active root ${result.activeRootId}.` : ', no active root.')
  );
}

function engineRecord(result: CompactResult): Record<string, unknown> | undefined {
  const record = result.compaction.details.ds4ContextEngine;
  return isRecord(record) ? record : undefined;
}

function elideEmbeddedContent(details: Record<string, unknown>): Record<string, unknown> {
  const record = details.ds4ContextEngine;
  if (!isRecord(record) || !Array.isArray(record.embeddedNodes)) {
    return details;
  }
  const embeddedNodes = record.embeddedNodes.map((node: unknown) =>
    isRecord(node) && typeof node.content === 'string'
      ? { ...node, content: `(${formatInt(node.content.length)} characters)` }
      : node,
  );
  return { ...details, ds4ContextEngine: { ...record, embeddedNodes } };
}

function stringField(record: Record<string, unknown> | undefined, key: string): string | undefined {
  const value = record?.[key];
  return typeof value === 'string' ? value : undefined;
}

/**
 * Text that is not ours as Markdown that renders as exactly that text, on one line, anywhere
 * inline (a paragraph, a heading, a list item, a table cell): `&`, `<` and `>` as entities (no
 * HTML, no autolink), every other ASCII punctuation character backslash-escaped (CommonMark: any
 * ASCII punctuation may be; so no link, image, emphasis, code span, math, list or heading
 * syntax, and no `|` that splits a table cell), runs of white space (line breaks too) as one
 * space. An escaped `:`, `/` or `@` also splits the text markdown-it's linkify sees, so a bare
 * `https://…`, `//host` or `name@host` stays unlinked (VS Code turns fuzzy links like
 * `www.host` off).
 */
export function markdownLiteral(text: string): string {
  return text
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/[!-/:-@[-`{-~]/g, (char) => {
      switch (char) {
        case '&':
          return '&amp;';
        case '<':
          return '&lt;';
        case '>':
          return '&gt;';
        default:
          return `\\${char}`;
      }
    });
}

/**
 * `text` as a fenced code block that nothing inside can close: the fence is one backtick longer
 * than the longest run of backticks in `text`, at least three. The preview shows the content
 * as is (no HTML, links or Markdown); `info` (no backticks) names the language, e.g. `json`.
 */
export function markdownFence(text: string, info = ''): string {
  const longest = (text.match(/`+/g) ?? []).reduce((most, run) => Math.max(most, run.length), 0);
  const fence = '`'.repeat(Math.max(3, longest + 1));
  return `${fence}${info}\n${text}\n${fence}`;
}

/** Plain text for a notification: `](` becomes `] (`, so no `[label](target)` link forms. */
function unlinked(text: string): string {
  return text.replace(/\]\(/g, '] (');
}

function list(values: string[]): string {
  return values.length === 0 ? 'none' : values.map(markdownLiteral).join(', ');
}

/**
 * A code span for an id or a path, safe in a table cell: backticks become `'`, line breaks
 * spaces, and `|` is escaped (the table splitter drops that backslash, so the span shows `|`).
 */
function code(text: string): string {
  return `\`${text.replace(/`/g, "'").replace(/\r?\n|\r/g, ' ').replace(/\|/g, '\\|')}\``;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
