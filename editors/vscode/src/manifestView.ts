/**
 * A plan manifest (`ds4/manifest`, metadata only) as one self-contained HTML page for the
 * "DS4: Show Manifest" webview: what filled the context window and how much of each budget it
 * used, the retrieved history and why, per scope what was sent and why not (relevance), what
 * the privacy policy held back (`privacyView.ts`), every included and excluded item with its
 * tokens and reason (excluded ones also grouped by reason, the below-floor ones by floor), and
 * the full budget. Model awareness (actual against estimated tokens, the cache share, the
 * calibration, a model switch, the continuation decision) is rendered by `usageView.ts`.
 *
 * Safety: every value from the manifest is HTML-escaped; the page has no scripts, loads
 * nothing, and carries a Content-Security-Policy that allows only its own nonce'd style
 * block (bar widths are classes defined there, not inline `style` attributes).
 *
 * Pure module: no `vscode` import.
 */

import { checkNonce, escapeHtml, htmlPage } from './html';
import { renderPrivacy } from './privacyView';
import { type Manifest, type ManifestItem, type PlanResult, type ProjectSnippet, RETRIEVE_SCOPES } from './protocol';
import { formatInt } from './status';
import { actualInputCard, MODEL_AWARENESS_STYLE, renderModelAwareness } from './usageView';

export { escapeHtml } from './html';

export interface RenderOptions {
  /** CSP nonce of the style block: at least 16 characters of [A-Za-z0-9+/=]. */
  nonce: string;
  /** The plan the manifest belongs to, when known: adds its warnings and session file. */
  plan?: PlanResult;
  /** Rows shown per item table; the rest are counted. Default 500. */
  maxRows?: number;
}

/** Budget keys that cap the tokens of one item kind. */
const KIND_CAPS: Record<string, string> = {
  recent: 'recentTailTokens',
  history: 'maxRetrievedHistoryTokens',
  project: 'maxProjectTokens',
  summary: 'maxSummaryTokens',
  pinned: 'maxPinnedTokens',
  memory: 'maxMemoryTokens',
};

/** Kinds with a colour of their own; the rest share one. */
const KIND_COLOURS: Record<string, string> = {
  fixed: 'var(--vscode-charts-yellow, #cca700)',
  current: 'var(--vscode-charts-green, #388a34)',
  recent: 'var(--vscode-charts-blue, #1a85ff)',
  history: 'var(--vscode-charts-purple, #652d90)',
  project: 'var(--vscode-charts-orange, #d18616)',
  summary: 'var(--vscode-charts-red, #e51400)',
};
const OTHER_COLOUR = 'var(--vscode-descriptionForeground, #888)';

const BUDGET_LABELS: Record<string, string> = {
  contextWindow: 'Context window',
  outputReserve: 'Output reserve',
  safetyMargin: 'Safety margin',
  hardInputLimit: 'Hard input limit',
  softLimit: 'Soft limit',
  targetInputTokens: 'Target input',
  activeInputBudget: 'Active input budget',
  recentTailTokens: 'Recent tail cap',
  maxRetrievedHistoryTokens: 'Retrieved history cap',
  maxProjectTokens: 'Project snippets cap',
  maxSummaryTokens: 'Summaries cap',
  maxPinnedTokens: 'Pinned cap',
  maxMemoryTokens: 'Memory cap',
  calibrationRatio: 'Calibration ratio',
  autoTuned: 'Auto-tuned (autoTune raised the target)',
};

/** The whole HTML document for `manifest`. */
export function renderManifestHtml(manifest: Manifest, options: RenderOptions): string {
  checkNonce(options.nonce, 'renderManifestHtml');
  const page = new Page(options.maxRows ?? 500);
  const body = [
    renderHeader(manifest, options.plan),
    renderWarnings(manifest, options.plan),
    renderSummary(manifest),
    renderModelAwareness(manifest),
    renderWindow(page, manifest),
    renderKinds(page, manifest),
    renderRetrieved(manifest),
    renderProject(manifest),
    renderRelevance(manifest),
    renderPrivacy(manifest, page.maxRows),
    renderIncluded(page, manifest),
    renderExcluded(page, manifest),
    renderBudgets(manifest),
    renderFooter(manifest),
  ].join('\n');
  return htmlPage({
    who: 'renderManifestHtml',
    nonce: options.nonce,
    title: `DS4 manifest ${manifest.id}`,
    style: `${STYLE}
${MODEL_AWARENESS_STYLE}
${page.rules()}`,
    body,
  });
}

/** Collects the width and position classes a page uses, as CSS rules for its style block. */
class Page {
  private readonly widthRules = new Map<string, string>();
  constructor(readonly maxRows: number) {}

  /** A class setting `property` to `percent`% (clamped to 0..100, 0.1 steps). */
  percentClass(property: 'width' | 'left', percent: number): string {
    const tenths = Math.round(Math.min(100, Math.max(0, percent)) * 10);
    const name = `${property === 'width' ? 'w' : 'l'}${String(tenths)}`;
    this.widthRules.set(name, `.${name}{${property}:${String(tenths / 10)}%}`);
    return name;
  }

  rules(): string {
    return [...this.widthRules.values()].sort().join('\n');
  }
}

function renderHeader(manifest: Manifest, plan: PlanResult | undefined): string {
  const facts = [
    formatDate(manifest.createdAt),
    manifest.sessionId !== null && `session <code>${escapeHtml(manifest.sessionId)}</code>`,
    manifest.branchLeafId !== null && `leaf <code>${escapeHtml(manifest.branchLeafId)}</code>`,
    plan?.session && `file <code>${escapeHtml(plan.session.file)}</code>`,
  ].filter(isText);
  return `<header>
<h1>Context manifest <code>${escapeHtml(manifest.id)}</code> ${modePill(manifest.planning.mode)}</h1>
<p class="meta">${facts.join(' · ')}</p>
</header>`;
}

function renderWarnings(manifest: Manifest, plan: PlanResult | undefined): string {
  const warnings = [...new Set([...(plan?.warnings ?? []), ...manifest.warnings])];
  const reason = manifest.planning.fallbackReason ?? plan?.fallbackReason;
  if (warnings.length === 0 && !reason) {
    return '';
  }
  const items = [
    reason && `<li><strong>Fell back to the original messages:</strong> ${escapeHtml(reason)}</li>`,
    ...warnings.map((warning) => `<li>${escapeHtml(warning)}</li>`),
  ].filter(isText);
  return `<section class="warnings"><h2>Warnings</h2><ul>${items.join('')}</ul></section>`;
}

function renderSummary(manifest: Manifest): string {
  const counts = itemCounts(manifest);
  const model = [manifest.provider, manifest.model].filter((part) => part !== null).join('/') || 'unknown model';
  const windowShare = percentOf(manifest.estimatedTokens, manifest.contextWindow);
  const actual = actualInputCard(manifest);
  const cards = [
    card(
      'Input estimate',
      `${formatInt(manifest.estimatedTokens)} tokens`,
      `${windowShare} of the window; target ${formatInt(manifest.targetInputTokens)}, hard limit ${formatInt(manifest.hardInputLimit)}`,
    ),
    card('Actual input', actual.value, actual.detail),
    card(
      'Items',
      `${formatInt(counts.included)} included`,
      `${formatInt(counts.excluded)} excluded; fixed prompt ${formatInt(manifest.fixedTokens)} tokens`,
    ),
    card(
      'Model',
      escapeHtml(model),
      `${formatInt(manifest.contextWindow)}-token window${manifest.modelSource ? ` from ${escapeHtml(manifest.modelSource)}` : ''}`,
    ),
  ];
  return `<section class="cards">${cards.join('')}</section>`;
}

function card(label: string, value: string, detail: string): string {
  return `<div class="card"><div class="label">${escapeHtml(label)}</div><div class="value">${value}</div><div class="detail">${detail}</div></div>`;
}

/** The context window as one bar: tokens by kind, then the output reserve; limit markers. */
function renderWindow(page: Page, manifest: Manifest): string {
  const window = manifest.contextWindow;
  if (window <= 0) {
    return '';
  }
  const used = usedByKind(manifest);
  const segments = used
    .filter(([, tokens]) => tokens > 0)
    .map(
      ([kind, tokens]) =>
        `<span class="seg ${kindClass(kind)} ${page.percentClass('width', (100 * tokens) / window)}" title="${escapeHtml(`${kind}: ${formatInt(tokens)} tokens`)}"></span>`,
    );
  const reserveStart = window - manifest.outputReserve;
  const markers = [
    marker(page, 'Target', manifest.targetInputTokens, window),
    marker(page, 'Hard limit', manifest.hardInputLimit, window),
  ];
  const reserve =
    manifest.outputReserve > 0 && reserveStart >= 0
      ? `<span class="reserve ${page.percentClass('left', (100 * reserveStart) / window)} ${page.percentClass('width', (100 * manifest.outputReserve) / window)}" title="output reserve: ${formatInt(manifest.outputReserve)} tokens"></span>`
      : '';
  const legend = used
    .map(
      ([kind, tokens]) =>
        `<li><span class="swatch ${kindClass(kind)}"></span>${escapeHtml(kind)} <span class="num">${formatInt(tokens)}</span></li>`,
    )
    .concat(
      manifest.outputReserve > 0
        ? [`<li><span class="swatch reserve-swatch"></span>output reserve <span class="num">${formatInt(manifest.outputReserve)}</span></li>`]
        : [],
    );
  return `<section>
<h2>Context window <span class="sub">${formatInt(window)} tokens</span></h2>
<div class="bar" role="img" aria-label="${escapeHtml(`${formatInt(manifest.estimatedTokens)} of ${formatInt(window)} tokens planned`)}">${segments.join('')}${reserve}${markers.join('')}</div>
<ul class="legend">${legend.join('')}</ul>
</section>`;
}

function marker(page: Page, label: string, tokens: number, window: number): string {
  return `<span class="marker ${page.percentClass('left', (100 * tokens) / window)}" title="${escapeHtml(`${label}: ${formatInt(tokens)} tokens`)}"><span class="marker-label">${escapeHtml(label)}</span></span>`;
}

/** Tokens per kind against the kind's cap. */
function renderKinds(page: Page, manifest: Manifest): string {
  const rows = usedByKind(manifest).map(([kind, tokens]) => {
    const capKey = KIND_CAPS[kind];
    const value = capKey === undefined ? undefined : manifest.budgets[capKey];
    const cap = typeof value === 'number' ? value : undefined;
    const use =
      cap === undefined
        ? '<td class="muted">no cap</td>'
        : `<td><span class="meter"><span class="fill ${tokens > cap ? 'over' : kindClass(kind)} ${page.percentClass('width', cap > 0 ? (100 * tokens) / cap : 100)}"></span></span> ${percentOf(tokens, cap)}</td>`;
    return `<tr><td><span class="swatch ${kindClass(kind)}"></span>${escapeHtml(kind)}</td><td class="num">${formatInt(tokens)}</td><td class="num">${cap === undefined ? '' : formatInt(cap)}</td>${use}</tr>`;
  });
  return `<section>
<h2>Tokens by kind</h2>
<table><thead><tr><th>Kind</th><th class="num">Tokens</th><th class="num">Cap</th><th>Use of cap</th></tr></thead>
<tbody>${rows.join('')}</tbody></table>
</section>`;
}

function renderRetrieved(manifest: Manifest): string {
  if (manifest.retrieved.length === 0) {
    const why = manifest.relevance?.history?.why;
    return `<section><h2>Retrieved history</h2><p class="muted">No history was retrieved for this plan${
      typeof why === 'string' && why !== '' ? `: ${escapeHtml(why)}` : ''
    }.</p></section>`;
  }
  const rows = manifest.retrieved.map(
    (hit) =>
      `<tr><td>${entryLabel(hit.entryKey, manifest.sessionId)}</td><td class="num">${formatScore(hit.score)}</td><td>${escapeHtml(hit.reason)}</td></tr>`,
  );
  const stats = manifest.retrieval
    ? `<p class="muted">${formatInt(manifest.retrieval.candidates)} candidates, ${formatInt(manifest.retrieval.alreadyInContext)} already in context, ${formatInt(manifest.retrieval.alternateBranchCandidates)} on other branches, ${formatInt(manifest.retrieval.duplicates)} duplicates; ${formatMs(manifest.retrieval.latencyMs)}.</p>`
    : '';
  return `<section>
<h2>Retrieved history <span class="sub">${formatInt(manifest.retrieved.length)} entries</span></h2>
${stats}
<table><thead><tr><th>Entry</th><th class="num">Score</th><th>Why it matched</th></tr></thead>
<tbody>${rows.join('')}</tbody></table>
</section>`;
}

function renderIncluded(page: Page, manifest: Manifest): string {
  const counts = itemCounts(manifest);
  if (manifest.included === undefined) {
    return `<section><h2>Included <span class="sub">${formatInt(counts.included)} items</span></h2><p class="muted">The item list was not loaded (summary view).</p></section>`;
  }
  const byKind = groupBy(manifest.included, (item) => item.kind);
  const summary = byKind.map(
    ([kind, items]) =>
      `<tr><td><span class="swatch ${kindClass(kind)}"></span>${escapeHtml(kind)}</td><td class="num">${formatInt(countItems(items))}</td><td class="num">${formatInt(sumTokens(items))}</td></tr>`,
  );
  return `<section>
<h2>Included <span class="sub">${formatInt(countItems(manifest.included))} items, ${formatInt(sumTokens(manifest.included))} tokens</span></h2>
<table><thead><tr><th>Kind</th><th class="num">Items</th><th class="num">Tokens</th></tr></thead>
<tbody>${summary.join('')}</tbody></table>
${itemTable(page, 'All included items, in plan order', manifest.included, snippetsById(manifest))}
</section>`;
}

function renderExcluded(page: Page, manifest: Manifest): string {
  const counts = itemCounts(manifest);
  if (manifest.excluded === undefined) {
    return `<section><h2>Excluded <span class="sub">${formatInt(counts.excluded)} items</span></h2><p class="muted">The item list was not loaded (summary view).</p></section>`;
  }
  const byReason = groupBy(manifest.excluded, (item) => reasonGroup(item.reason)).sort(
    ([, a], [, b]) => sumTokens(b) - sumTokens(a) || countItems(b) - countItems(a),
  );
  const summary = byReason.map(
    ([reason, items]) =>
      `<tr><td>${escapeHtml(reason)}</td><td class="num">${formatInt(countItems(items))}</td><td class="num">${formatInt(sumTokens(items))}</td></tr>`,
  );
  const rollup = manifest.excludedRollup;
  const rollupNote =
    rollup && rollup.omitted > 0
      ? `<p class="muted">${formatInt(rollup.omitted)} of ${formatInt(rollup.total)} excluded items were rolled up when the manifest was stored and are not listed.</p>`
      : '';
  return `<section>
<h2>Excluded <span class="sub">${formatInt(counts.excluded)} items, ${formatInt(sumTokens(manifest.excluded))} tokens listed</span></h2>
${rollupNote}
<table><thead><tr><th>Why it was left out</th><th class="num">Items</th><th class="num">Tokens</th></tr></thead>
<tbody>${summary.join('')}</tbody></table>
${itemTable(page, 'All excluded items', manifest.excluded, snippetsById(manifest))}
</section>`;
}

function itemTable(
  page: Page,
  title: string,
  items: ManifestItem[],
  snippets: Map<string, ProjectSnippet>,
): string {
  if (items.length === 0) {
    return '';
  }
  const shown = items.slice(0, page.maxRows);
  const rows = shown.map((item) => {
    const snippet = item.kind === 'project' ? snippets.get(item.sourceId) : undefined;
    const source = snippet
      ? `<code title="${escapeHtml(`snippet ${item.sourceId}`)}">${escapeHtml(snippetLabel(snippet))}</code>`
      : sourceCell(item);
    const score = item.score ?? snippet?.score ?? null;
    const reason =
      snippet && snippet.reason !== '' && snippet.reason !== item.reason
        ? `${item.reason}; ${snippet.reason}`
        : item.reason;
    return `<tr><td><span class="swatch ${kindClass(item.kind)}"></span>${escapeHtml(item.kind)}</td><td>${source}</td><td>${item.groupId === null ? '' : `<code>${escapeHtml(item.groupId)}</code>`}</td><td>${escapeHtml(item.classification ?? '')}</td><td class="num">${formatInt(item.tokens)}</td><td class="num">${score === null ? '' : formatScore(score)}</td><td>${escapeHtml(reason)}</td></tr>`;
  });
  const more =
    items.length > shown.length
      ? `<p class="muted">${formatInt(countItems(items.slice(shown.length)))} more not shown.</p>`
      : '';
  return `<details><summary>${escapeHtml(title)} (${formatInt(countItems(items))})</summary>
<table class="items"><thead><tr><th>Kind</th><th>Source</th><th>Group</th><th>Class</th><th class="num">Tokens</th><th class="num">Score</th><th>Reason</th></tr></thead>
<tbody>${rows.join('')}</tbody></table>${more}</details>`;
}

/**
 * An item's Source cell: its `sourceId`, or for a bulk item the range it stands for,
 * `first … last (N messages)` (as the CLI's `first .. last (N messages)`).
 */
function sourceCell(item: ManifestItem): string {
  const count = messageCount(item);
  if (count === 1) {
    return `<code>${escapeHtml(item.sourceId)}</code>`;
  }
  return `<code>${escapeHtml(item.sourceId)}</code> … <code>${escapeHtml(item.lastSourceId ?? '?')}</code> (${formatInt(count)} messages)`;
}

/**
 * How many messages `item` stands for: a bulk item's `count` (an integer over 1), else 1.
 * Item counts in the page count messages, as the server's `planning.counts` do.
 */
export function messageCount(item: ManifestItem): number {
  const count = item.count;
  return typeof count === 'number' && Number.isInteger(count) && count > 1 ? count : 1;
}

/** The messages `items` stand for: one each, a bulk item its `count`. */
function countItems(items: ManifestItem[]): number {
  return items.reduce((total, item) => total + messageCount(item), 0);
}

/** `countItems` of a loaded item list; `undefined` when the list was not loaded. */
function countListed(items: ManifestItem[] | undefined): number | undefined {
  return items === undefined ? undefined : countItems(items);
}

/** Project snippets of the manifest by snippet id (`sourceId` of `project` items). */
function snippetsById(manifest: Manifest): Map<string, ProjectSnippet> {
  return new Map((manifest.projectSnippets ?? []).map((snippet) => [snippet.snippetId, snippet]));
}

/** `src/app.py:12-40`. */
function snippetLabel(snippet: ProjectSnippet): string {
  const [start, end] = snippet.lines;
  return `${snippet.path}:${String(start)}-${String(end)}`;
}

/**
 * Project knowledge: the project search's status, the workspace revision, the snippets the
 * plan sent (path and lines, score, why) and the files left out. Omitted for servers without
 * project knowledge (no `project` in the manifest).
 */
function renderProject(manifest: Manifest): string {
  const project = manifest.project;
  const snippets = manifest.projectSnippets ?? [];
  const revision = manifest.projectRevision ?? null;
  if (project === undefined && snippets.length === 0 && revision === null) {
    return '';
  }
  const facts = [
    project !== undefined && `status <strong>${escapeHtml(project.status)}</strong>`,
    revision?.branch && `branch <code>${escapeHtml(revision.branch)}</code>`,
    revision?.head && `head <code title="${escapeHtml(revision.head)}">${escapeHtml(revision.head.slice(0, 12))}</code>`,
    typeof revision?.dirty === 'boolean' && (revision.dirty ? 'working tree dirty' : 'working tree clean'),
    revision !== null && revision.branch === null && revision.head === null && 'no git',
    revision?.indexedAt && `indexed ${formatDate(revision.indexedAt)}`,
    project?.reindexed &&
      project.reindexed.length > 0 &&
      `${formatInt(project.reindexed.length)} changed file(s) re-indexed`,
  ].filter(isText);
  const rows = snippets.map(
    (snippet) =>
      `<tr><td><code title="${escapeHtml(`snippet ${snippet.snippetId}`)}">${escapeHtml(snippetLabel(snippet))}</code></td><td class="num">${formatScore(snippet.score)}</td><td>${escapeHtml(snippet.reason)}</td><td>${snippet.modified ? 'modified' : ''}</td></tr>`,
  );
  const table =
    rows.length > 0
      ? `<table><thead><tr><th>Lines</th><th class="num">Score</th><th>Why it matched</th><th>Tree</th></tr></thead>
<tbody>${rows.join('')}</tbody></table>`
      : '<p class="muted">No project snippets were sent with this plan.</p>';
  const dropped = project?.dropped ?? [];
  const droppedList =
    dropped.length > 0
      ? `<h3>Left out <span class="sub">${formatInt(dropped.length)} file(s)</span></h3><ul>${dropped
          .map((entry) => `<li><code>${escapeHtml(entry.path)}</code>: ${escapeHtml(entry.reason)}</li>`)
          .join('')}</ul>`
      : '';
  return `<section class="project">
<h2>Project <span class="sub">${formatInt(snippets.length)} snippets</span></h2>
<p class="meta">${facts.join(' · ')}</p>
${table}
${droppedList}
</section>`;
}

/**
 * The reason an excluded item is grouped under: its own, except that below-floor reasons
 * (`below the relevance floor (0.210 < 0.350)`, `below the relative floor (0.520 of the best
 * hit's score < 0.700)`, one score each) share one group per rule and floor (`below the
 * relevance floor (score < 0.350)`). The item table keeps each item's own reason.
 */
export function reasonGroup(reason: string): string {
  const floor = /^below the relevance floor \(-?[\d.]+ < (-?[\d.]+)\)$/.exec(reason)?.[1];
  if (floor !== undefined) {
    return `below the relevance floor (score < ${floor})`;
  }
  const share = /^below the relative floor \(-?[\d.]+ of the best hit's score < (-?[\d.]+)\)$/.exec(reason)?.[1];
  return share === undefined ? reason : `below the relative floor (share of the best hit's score < ${share})`;
}

/**
 * Relevance: per scope searched (history, project, git), what was sent, how many candidates
 * fell under the relevance floor (with the floor and the best of them), and why nothing was
 * sent. Omitted for servers without the floor (no `relevance` in the manifest).
 */
function renderRelevance(manifest: Manifest): string {
  const relevance = manifest.relevance;
  if (relevance === undefined) {
    return '';
  }
  const rows = RETRIEVE_SCOPES.flatMap((scope) => {
    const entry = relevance[scope];
    if (entry === undefined) {
      return [];
    }
    const number = (value: number | null): string => (value === null ? '' : value.toFixed(3));
    return [
      `<tr><td>${escapeHtml(scope)}</td><td>${escapeHtml(entry.status)}</td><td class="num">${formatInt(entry.sent)}</td><td class="num">${formatInt(entry.belowFloor)}</td><td class="num">${number(entry.floor)}</td><td class="num">${number(entry.best)}</td><td>${entry.why === null ? '' : escapeHtml(entry.why)}</td></tr>`,
    ];
  });
  if (rows.length === 0) {
    return '';
  }
  return `<section class="relevance">
<h2>Relevance <span class="sub">what each search sent, and why not</span></h2>
<table><thead><tr><th>Scope</th><th>Status</th><th class="num">Sent</th><th class="num">Below floor</th><th class="num">Floor</th><th class="num">Best below</th><th>Why none was sent</th></tr></thead>
<tbody>${rows.join('')}</tbody></table>
</section>`;
}

function renderBudgets(manifest: Manifest): string {
  const rows = Object.entries(manifest.budgets).map(
    ([key, value]) =>
      `<tr><td>${escapeHtml(BUDGET_LABELS[key] ?? key)}</td><td class="num">${budgetValue(key, value)}</td><td class="muted"><code>${escapeHtml(key)}</code></td></tr>`,
  );
  return `<section>
<h2>Budget <span class="sub">tokens</span></h2>
<table><tbody>${rows.join('')}</tbody></table>
</section>`;
}

/** A budget value: tokens with separators, the ratio as is, a flag as yes/no. */
function budgetValue(key: string, value: number | boolean | undefined): string {
  if (typeof value === 'boolean') {
    return value ? 'yes' : 'no';
  }
  if (typeof value !== 'number') {
    return '';
  }
  return key === 'calibrationRatio' ? escapeHtml(String(value)) : formatInt(value);
}

function renderFooter(manifest: Manifest): string {
  const facts = [
    `policy <code>${escapeHtml(manifest.policyVersion)}</code>`,
    `planner <code>${escapeHtml(manifest.plannerVersion)}</code>`,
    `estimator <code>${escapeHtml(manifest.estimatorVersion)}</code>`,
    manifest.promptHash !== null && `prompt hash <code>${escapeHtml(manifest.promptHash.slice(0, 16))}</code>`,
    manifest.planning.rescuedImmediatePredecessor && 'rescued the turn before the tail',
    manifest.planning.oversizedTurnExclusions > 0 &&
      `${formatInt(manifest.planning.oversizedTurnExclusions)} oversized turns excluded`,
  ].filter(isText);
  return `<footer>${facts.join(' · ')}</footer>`;
}

/** `[kind, tokens]` in display order: fixed prompt, then the planner's kinds as reported. */
function usedByKind(manifest: Manifest): [string, number][] {
  const kinds = Object.entries(manifest.planning.tokens);
  return manifest.fixedTokens > 0 ? [['fixed', manifest.fixedTokens], ...kinds] : kinds;
}

function itemCounts(manifest: Manifest): { included: number; excluded: number } {
  return {
    included: countListed(manifest.included) ?? manifest.itemCounts?.included ?? manifest.planning.counts.included ?? 0,
    excluded:
      manifest.excludedRollup?.total ??
      countListed(manifest.excluded) ??
      manifest.itemCounts?.excluded ??
      manifest.planning.counts.excluded ??
      0,
  };
}

/** An entry key as its entry id when it belongs to the manifest's session (full key on hover). */
function entryLabel(entryKey: string, sessionId: string | null): string {
  const prefix = sessionId === null ? undefined : `${sessionId}:`;
  if (prefix === undefined || !entryKey.startsWith(prefix)) {
    return `<code>${escapeHtml(entryKey)}</code>`;
  }
  return `<code title="${escapeHtml(entryKey)}">${escapeHtml(entryKey.slice(prefix.length))}</code>`;
}

function modePill(mode: string): string {
  const known = ['managed', 'observer', 'fallback'].includes(mode) ? mode : 'other';
  return `<span class="pill mode-${known}">${escapeHtml(mode)}</span>`;
}

/** A kind's colour class; kinds are server data, so unknown ones share `k-other`. */
function kindClass(kind: string): string {
  return kind in KIND_COLOURS ? `k-${kind}` : 'k-other';
}

function groupBy<T>(items: T[], key: (item: T) => string): [string, T[]][] {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const name = key(item);
    const group = groups.get(name);
    if (group) {
      group.push(item);
    } else {
      groups.set(name, [item]);
    }
  }
  return [...groups.entries()];
}

function sumTokens(items: ManifestItem[]): number {
  return items.reduce((total, item) => total + item.tokens, 0);
}

function percentOf(part: number, whole: number): string {
  if (whole <= 0) {
    return '';
  }
  const percent = (100 * part) / whole;
  return `${percent < 10 ? percent.toFixed(1) : String(Math.round(percent))}%`;
}

function formatScore(score: number): string {
  return score.toFixed(2);
}

function formatMs(ms: number): string {
  return `${ms < 10 ? ms.toFixed(1) : String(Math.round(ms))} ms`;
}

/** `2026-11-30T10:44:18.856Z` -> `2026-11-30 10:44:18 UTC`; anything else as is. */
function formatDate(iso: string): string {
  const match = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.\d+)?Z$/.exec(iso);
  return match ? `${match[1] ?? ''} ${match[2] ?? ''} UTC` : escapeHtml(iso);
}

function isText(value: string | false | undefined | null | 0): value is string {
  return typeof value === 'string' && value !== '';
}

const STYLE = `
:root { color-scheme: light dark; }
body { font-family: var(--vscode-font-family, system-ui, sans-serif); font-size: var(--vscode-font-size, 13px);
  color: var(--vscode-foreground, #ccc); background: var(--vscode-editor-background, #1e1e1e);
  margin: 0 auto; padding: 16px 24px 32px; max-width: 1200px; line-height: 1.45; }
h1 { font-size: 1.35em; margin: 0 0 4px; font-weight: 600; }
h2 { font-size: 1.1em; margin: 24px 0 8px; font-weight: 600; }
.sub, .meta, .muted, .detail, .label { color: var(--vscode-descriptionForeground, #999); font-weight: normal; }
.sub { font-size: 0.85em; margin-left: 6px; }
code { font-family: var(--vscode-editor-font-family, monospace); font-size: 0.95em; }
.pill { font-size: 0.7em; padding: 2px 8px; border-radius: 10px; vertical-align: middle; margin-left: 6px;
  border: 1px solid var(--vscode-contrastBorder, transparent); }
.mode-managed { background: var(--vscode-charts-green, #388a34); color: #fff; }
.mode-observer { background: var(--vscode-charts-blue, #1a85ff); color: #fff; }
.mode-fallback, .mode-other { background: var(--vscode-charts-orange, #d18616); color: #fff; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(220px, 1fr)); gap: 10px; margin-top: 16px; }
.card { border: 1px solid var(--vscode-panel-border, #444); border-radius: 6px; padding: 10px 12px; }
.card .label { font-size: 0.8em; text-transform: uppercase; letter-spacing: 0.04em; }
.card .value { font-size: 1.3em; font-weight: 600; margin: 2px 0; }
.card .detail { font-size: 0.85em; }
.warnings { border-left: 3px solid var(--vscode-editorWarning-foreground, #cca700); padding-left: 12px; }
.bar { position: relative; display: flex; height: 22px; border-radius: 4px; overflow: visible; margin: 28px 0 6px;
  background: var(--vscode-editorWidget-background, #252526); border: 1px solid var(--vscode-panel-border, #444); }
.seg { display: block; height: 100%; min-width: 2px; }
.reserve { position: absolute; top: 0; height: 100%; opacity: 0.35;
  background: repeating-linear-gradient(45deg, var(--vscode-descriptionForeground, #888) 0 4px, transparent 4px 8px); }
.marker { position: absolute; top: -6px; height: 34px; width: 0; border-left: 2px dashed var(--vscode-editorWarning-foreground, #cca700); }
.marker-label { position: absolute; top: -18px; left: 2px; font-size: 0.75em; white-space: nowrap; color: var(--vscode-descriptionForeground, #999); }
.legend { list-style: none; padding: 0; margin: 4px 0 0; display: flex; flex-wrap: wrap; gap: 4px 16px; font-size: 0.9em; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; vertical-align: baseline; }
.reserve-swatch { background: var(--vscode-descriptionForeground, #888); opacity: 0.5; }
.k-fixed { background: ${KIND_COLOURS.fixed ?? OTHER_COLOUR}; }
.k-current { background: ${KIND_COLOURS.current ?? OTHER_COLOUR}; }
.k-recent { background: ${KIND_COLOURS.recent ?? OTHER_COLOUR}; }
.k-history { background: ${KIND_COLOURS.history ?? OTHER_COLOUR}; }
.k-project { background: ${KIND_COLOURS.project ?? OTHER_COLOUR}; }
.k-summary { background: ${KIND_COLOURS.summary ?? OTHER_COLOUR}; }
.k-other { background: ${OTHER_COLOUR}; }
.meter { display: inline-block; width: 120px; height: 8px; border-radius: 4px; vertical-align: middle; margin-right: 6px;
  background: var(--vscode-editorWidget-background, #252526); border: 1px solid var(--vscode-panel-border, #444); overflow: hidden; }
.fill { display: block; height: 100%; }
.fill.over { background: var(--vscode-errorForeground, #f48771); }
table { border-collapse: collapse; width: 100%; margin: 4px 0 8px; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid var(--vscode-panel-border, #333); vertical-align: top; }
th { font-weight: 600; color: var(--vscode-descriptionForeground, #999); }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.items td { font-size: 0.92em; }
details { margin: 6px 0 0; }
summary { cursor: pointer; color: var(--vscode-textLink-foreground, #3794ff); }
footer { margin-top: 28px; font-size: 0.85em; color: var(--vscode-descriptionForeground, #999); }
`;
