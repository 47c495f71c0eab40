/**
 * Pins, memory and artifacts in the editor (docs/memory.md, docs/artifacts.md): the "DS4
 * Memory" page (pins and memory items with their provenance, and links that supersede,
 * forget or unpin them), what a write tells the user (the server appended the entry to a
 * session it owns, or it is only prepared: a Pi session is never written by ds4), the
 * `RequestFailed` a conflicting claim gets, and "DS4: Search Artifacts" results as text.
 *
 * Item text is user data: on the page every value is HTML-escaped, the page runs no script,
 * and its links are `command:` URIs of the one action command (`MEMORY_ACTION_COMMAND`),
 * whose argument is checked again when it runs (`parseMemoryAction`).
 *
 * Pure module: no `vscode` import.
 */

import { escapeHtml, htmlPage } from './html';
import {
  type ArtifactSearchResult,
  type ContextMutationResult,
  type MemoryItem,
  type MemoryResult,
  type PinItem,
  REQUEST_FAILED,
} from './protocol';

/** The internal command the page's links run (not in the palette). */
export const MEMORY_ACTION_COMMAND = 'ds4.client.memoryAction';

export type MemoryActionKind = 'forget' | 'unpin' | 'supersede';

/** One link of the page: what to do to which item. */
export interface MemoryAction {
  action: MemoryActionKind;
  kind: 'memory' | 'pin';
  id: string;
}

/**
 * The action a page link asked for, or `undefined` when `value` is not one: `forget` only
 * for memory, `unpin` only for pins, `supersede` for both; the id 1..256 characters.
 */
export function parseMemoryAction(value: unknown): MemoryAction | undefined {
  if (typeof value !== 'object' || value === null) {
    return undefined;
  }
  const { action, kind, id } = value as Record<string, unknown>;
  if (typeof id !== 'string' || id === '' || id.length > 256) {
    return undefined;
  }
  if (kind === 'memory' && (action === 'forget' || action === 'supersede')) {
    return { action, kind, id };
  }
  if (kind === 'pin' && (action === 'unpin' || action === 'supersede')) {
    return { action, kind, id };
  }
  return undefined;
}

/** A `command:` URI that runs `MEMORY_ACTION_COMMAND` with `action` (HTML-escaped for an attribute). */
export function actionUri(action: MemoryAction): string {
  return escapeHtml(`command:${MEMORY_ACTION_COMMAND}?${encodeURIComponent(JSON.stringify([action]))}`);
}

/**
 * A refused write (`RequestFailed`): the server's message; for a refusal that names an item,
 * that item (`conflictsWith`) and the server's `kind` of refusal when it sends one
 * (`conflict`: another value for the same thing; `repeat`: the same item again).
 */
export interface RefusedWrite {
  message: string;
  conflictsWith?: string;
  kind?: string;
}

/**
 * `error` as a refused write when it is the server's `RequestFailed` (-32803; a
 * vscode-jsonrpc `ResponseError` or anything with `code`, `message` and `data`), else
 * `undefined`. `conflictsWith` and `kind` are `data.conflictsWith` and `data.kind` when they
 * are non-empty strings.
 */
export function refusedWrite(error: unknown): RefusedWrite | undefined {
  if (typeof error !== 'object' || error === null) {
    return undefined;
  }
  const { code, message, data } = error as { code?: unknown; message?: unknown; data?: unknown };
  if (code !== REQUEST_FAILED || typeof message !== 'string') {
    return undefined;
  }
  const fields = typeof data === 'object' && data !== null ? (data as Record<string, unknown>) : {};
  const named = (value: unknown): value is string => typeof value === 'string' && value !== '';
  return {
    message,
    ...(named(fields.conflictsWith) && { conflictsWith: fields.conflictsWith }),
    ...(named(fields.kind) && { kind: fields.kind }),
  };
}

/**
 * The item a refused write could supersede: `conflictsWith` when the refusal is a conflict
 * (`kind` "conflict", or no `kind` from an older server); `undefined` for a repeat or a
 * refusal that names no item, where superseding would change nothing.
 */
export function supersedeTarget(refused: RefusedWrite): string | undefined {
  return refused.kind === undefined || refused.kind === 'conflict' ? refused.conflictsWith : undefined;
}

/**
 * The Pi entry of a write as one JSON line: the server's complete `entry` (id, parentId,
 * timestamp, customType, data) when it sends one, else `{"type":"custom","customType":...,
 * "data":{...}}` (older servers; Pi's `appendEntry` fills in the rest).
 */
export function mutationEntryJson(result: ContextMutationResult): string {
  return JSON.stringify(result.entry ?? { type: 'custom', customType: result.customType, data: result.data });
}

/**
 * What to tell the user after a write of `what` (`pin`, `memory`, ...): appended by the server
 * to the session it owns, with the entry id; or prepared only: ds4 never writes a Pi session,
 * so the agent's Pi extension must record it (`pi.appendEntry`), or the user appends the entry
 * line to the session file, or writes to the workspace's DS4-owned session instead.
 */
export function mutationNote(result: ContextMutationResult, what: string): string {
  if (result.appended) {
    return `DS4: ${what} ${result.itemId} recorded (entry ${result.entryId ?? '?'} appended to the DS4-owned session).`;
  }
  return (
    `DS4: ${what} ${result.itemId} prepared, not yet recorded: this is a Pi session and ds4 never writes it. ` +
    `The agent's Pi extension can record it with pi.appendEntry("${result.customType}", data); ` +
    `or copy the entry and append it to the session file as its last line; or use the workspace's DS4-owned session.`
  );
}

/** What the page was asked for: the session shown and whether inactive items are listed. */
export interface MemoryPageOptions {
  /** CSP nonce of the style block: 16 or more base64 characters. */
  nonce: string;
  /** The session file the list is for, shown in the heading. */
  sessionFile?: string;
  /** Whether the session is one the server owns (writes are appended at once). */
  owned?: boolean;
}

/**
 * The "DS4 Memory" page: pins, then memory items, each with scope, status, text, key,
 * provenance (origin session, entry, source entries or file, times) and action links for an
 * active item (Supersede; Unpin for a pin, Forget for memory); then the counts and the newest
 * rejected or invalid entries. No script; the CSP allows only the nonce'd style block.
 */
export function renderMemoryHtml(result: MemoryResult, options: MemoryPageOptions): string {
  const where =
    options.sessionFile === undefined
      ? 'every indexed session'
      : `<code>${escapeHtml(options.sessionFile)}</code>${options.owned === true ? ' (owned by DS4)' : ''}`;
  const pins = result.pins.map((pin) => pinRow(pin)).join('\n');
  const memory = result.memory.map((item) => memoryRow(item)).join('\n');
  const counts = result.counts;
  const problems = result.problems
    .map(
      (problem) =>
        `<li><code>${escapeHtml(problem.mutationKey)}</code> (${escapeHtml(problem.kind)}): ${escapeHtml(problem.problem)}</li>`,
    )
    .join('');
  return htmlPage({
    who: 'renderMemoryHtml',
    nonce: options.nonce,
    title: 'DS4 Memory',
    style: STYLE,
    body: `<h1>DS4 Memory <span class="sub">${where}</span></h1>
<p class="muted">Pins go into every plan of the session; memory items when they match the request. Item text is shown as stored and never sent anywhere from this page.</p>
<h2>Pins <span class="sub">${String(result.pins.length)}</span></h2>
${result.pins.length > 0 ? `<div class="items">${pins}</div>` : '<p class="muted">No pins. Select text and run <strong>DS4: Pin Selection</strong>.</p>'}
<h2>Memory <span class="sub">${String(result.memory.length)}</span></h2>
${result.memory.length > 0 ? `<div class="items">${memory}</div>` : '<p class="muted">No memory. Run <strong>DS4: Remember...</strong>.</p>'}
<p class="muted">Mutation entries: ${String(counts.applied)} applied, ${String(counts.rejected)} rejected, ${String(counts.invalid)} invalid.</p>
${problems === '' ? '' : `<h2>Rejected or invalid entries</h2><ul class="problems">${problems}</ul>`}`,
  });
}

function pinRow(pin: PinItem): string {
  const provenance = pin.provenance as Partial<PinItem['provenance']>;
  const facts = [
    `from session <code>${escapeHtml(text(provenance.sessionId))}</code> entry <code>${escapeHtml(text(provenance.mutationKey))}</code>`,
    typeof provenance.sourceFile === 'string' && `file <code>${escapeHtml(provenance.sourceFile)}</code>`,
    typeof provenance.sourceEntryId === 'string' && `source entry <code>${escapeHtml(provenance.sourceEntryId)}</code>`,
    typeof provenance.branchLeafId === 'string' && `branch leaf <code>${escapeHtml(provenance.branchLeafId)}</code>`,
  ];
  const actions =
    pin.status === 'active'
      ? [link({ action: 'supersede', kind: 'pin', id: pin.id }, 'Supersede'), link({ action: 'unpin', kind: 'pin', id: pin.id }, 'Unpin')]
      : [];
  return itemRow(pin, 'pin', `<pre>${escapeHtml(pin.content)}</pre>`, facts, actions);
}

function memoryRow(item: MemoryItem): string {
  const provenance = item.provenance as Partial<MemoryItem['provenance']>;
  const sources = Array.isArray(provenance.sourceEntryIds) ? provenance.sourceEntryIds : [];
  const facts = [
    typeof item.key === 'string' && item.key !== '' && `key <code>${escapeHtml(item.key)}</code>`,
    `from session <code>${escapeHtml(text(provenance.sessionId))}</code> entry <code>${escapeHtml(text(provenance.mutationKey))}</code>`,
    sources.length > 0 && `source entries ${sources.map((id) => `<code>${escapeHtml(id)}</code>`).join(', ')}`,
  ];
  const actions =
    item.status === 'active'
      ? [
          link({ action: 'supersede', kind: 'memory', id: item.id }, 'Supersede'),
          link({ action: 'forget', kind: 'memory', id: item.id }, 'Forget'),
        ]
      : [];
  return itemRow(item, 'memory', `<p class="claim">${escapeHtml(item.claim)}</p>`, facts, actions);
}

function itemRow(
  item: MemoryItem | PinItem,
  kind: 'pin' | 'memory',
  body: string,
  facts: (string | false)[],
  actions: string[],
): string {
  const state = [
    item.status !== 'active' && item.supersededBy !== null && `superseded by <code>${escapeHtml(item.supersededBy)}</code>`,
    item.status !== 'active' && typeof item.statusReason === 'string' && `reason: ${escapeHtml(item.statusReason)}`,
    typeof item.projectPath === 'string' && `project <code>${escapeHtml(item.projectPath)}</code>`,
    typeof item.classification === 'string' && `classification <code>${escapeHtml(item.classification)}</code>`,
    `created ${escapeHtml(formatTime(item.createdAt))}`,
    item.updatedAt !== item.createdAt && `updated ${escapeHtml(formatTime(item.updatedAt))}`,
  ];
  const all = [...facts, ...state].filter((fact): fact is string => typeof fact === 'string');
  return `<div class="item ${escapeHtml(item.status)}" data-kind="${kind}">
<div class="head"><code>${escapeHtml(item.id)}</code> <span class="badge">${escapeHtml(item.scope)}</span> <span class="badge status">${escapeHtml(item.status)}</span>${
    actions.length > 0 ? ` <span class="actions">${actions.join(' ')}</span>` : ''
  }</div>
${body}
<div class="facts">${all.join(' · ')}</div>
</div>`;
}

function link(action: MemoryAction, label: string): string {
  return `<a href="${actionUri(action)}">${label}</a>`;
}

/** The largest |ms| a JavaScript `Date` holds (ECMA-262: ±100,000,000 days from the epoch). */
const MAX_DATE_MS = 8.64e15;

/**
 * A ms-since-the-epoch time as ISO 8601 UTC; `-` when it is not a finite number or lies
 * outside what a `Date` holds (the server accepts times up to 2^53-1 ms).
 */
export function formatTime(ms: unknown): string {
  return typeof ms === 'number' && Number.isFinite(ms) && Math.abs(ms) <= MAX_DATE_MS ? new Date(ms).toISOString() : '-';
}

function text(value: unknown): string {
  return typeof value === 'string' && value !== '' ? value : '-';
}

/**
 * "DS4: Search Artifacts" results as plain text: the query, one block per match (artifact id,
 * line:column, the entry that referenced it, the redacted excerpt indented), a line per
 * artifact that could not be searched, and whether the list was cut.
 */
export function renderArtifactSearch(result: ArtifactSearchResult): string {
  const lines = [
    `DS4 artifact search for ${JSON.stringify(result.query)}: ${String(result.matches.length)} match${result.matches.length === 1 ? '' : 'es'} in ${String(
      result.searched.length,
    )} artifact${result.searched.length === 1 ? '' : 's'}${result.truncated ? ' (truncated: ask with a narrower query or a larger maxMatches)' : ''}.`,
    '',
  ];
  for (const match of result.matches) {
    lines.push(
      `artifact://sha256/${match.artifactId} ${String(match.line)}:${String(match.column)}${
        match.sourceId === null ? '' : ` (entry ${match.sourceId})`
      }`,
    );
    for (const line of match.excerpt.split(/\r?\n/)) {
      lines.push(`    ${line}`);
    }
    lines.push('');
  }
  const unreadable = result.searched.filter((searched) => searched.status !== 'ok');
  for (const searched of unreadable) {
    lines.push(`not searched: ${searched.artifactId} (${searched.status})`);
  }
  if (result.searched.length === 0) {
    lines.push('No artifact to search: the session references no stored tool output on its active branch.');
  }
  return `${lines.join('\n').trimEnd()}\n`;
}

/** A one-line summary of a memory list for a message: `3 pins, 5 memory items (2 inactive)`. */
export function memorySummary(result: MemoryResult): string {
  const inactive = [...result.pins, ...result.memory].filter((item) => item.status !== 'active').length;
  return `${String(result.pins.length)} pin${result.pins.length === 1 ? '' : 's'}, ${String(result.memory.length)} memory item${
    result.memory.length === 1 ? '' : 's'
  }${inactive > 0 ? ` (${String(inactive)} inactive)` : ''}`;
}

const STYLE = `
body { font-family: var(--vscode-font-family); color: var(--vscode-foreground); padding: 0 16px; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 18px; }
.sub, .muted { color: var(--vscode-descriptionForeground); font-weight: normal; }
.item { border-left: 3px solid var(--vscode-charts-blue, #1a85ff); padding: 4px 10px; margin: 8px 0; }
.item.superseded, .item.invalid, .item.expired, .item.deleted { border-left-color: var(--vscode-disabledForeground, #888); opacity: 0.75; }
.badge { border: 1px solid var(--vscode-descriptionForeground); border-radius: 3px; padding: 0 4px; font-size: 0.85em; }
.actions a { margin-left: 8px; }
pre, .claim { white-space: pre-wrap; margin: 4px 0; }
.facts { font-size: 0.9em; color: var(--vscode-descriptionForeground); }
`;
