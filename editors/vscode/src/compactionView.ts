/**
 * Text views of compaction results for read-only editor documents: a `ds4/compact` result as
 * Markdown ("DS4: Compact Session") and a `ds4.summaries` graph as plain text ("DS4: Show
 * Summary Graph"), plus the compaction entry as the JSON line an agent appends.
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
  const writer = provider !== undefined || model !== undefined ? ` (${provider ?? '?'}/${model ?? '?'})` : '';
  const validation = result.validation;
  const span = result.span;
  const rows: [string, string][] = [
    ['Session', context.sessionFile === undefined ? '—' : code(context.sessionFile) + (context.leafId ? ` at leaf ${code(context.leafId)}` : '')],
    ['Root (new active root)', `${code(result.summaryId)}: ${result.summaryKind}, graph level ${String(result.graphLevel)}`],
    ['Segment', result.segmentSummaryId === result.summaryId ? 'the root itself (no previous root)' : code(result.segmentSummaryId)],
    ['Previous root', span.previousSummaryId ? code(span.previousSummaryId) : 'none (first compaction of this branch)'],
    ['Summarizer', `${result.summarizer}${writer}`],
    ['Fallback reason', result.fallbackReason ?? '—'],
    [
      'Validation',
      `${validation.status}; issues before repairs: ${list(validation.issueCodes)}; repairs: ${list(validation.repairs)}`,
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
    `# DS4 compaction ${result.summaryId}`,
    '',
    `> **Not written to the session.** ${NOT_WRITTEN_NOTE}`,
    '',
    '| | |',
    '|---|---|',
    ...rows.map(([name, value]) => `| ${name} | ${cell(value)} |`),
    '',
  ];
  if (result.warnings.length > 0) {
    lines.push('## Warnings', '', ...result.warnings.map((warning) => `- ${warning}`), '');
  }
  const details = elideEmbeddedContent(result.compaction.details);
  lines.push(
    '## Compaction entry details',
    '',
    'The `details` the entry carries (embedded node texts shortened here; "DS4: Copy Compaction Entry" copies the full entry):',
    '',
    '```json',
    JSON.stringify(details, null, 2),
    '```',
    '',
    '# Summary',
    '',
    'The text of the compaction entry (the new root; what the model will see):',
    '',
    result.compaction.summary.trimEnd(),
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

function list(values: string[]): string {
  return values.length === 0 ? 'none' : values.join(', ');
}

function code(text: string): string {
  return `\`${text.replace(/`/g, "'")}\``;
}

/** A Markdown table cell: no pipes or line breaks. */
function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
