/**
 * Privacy in the views: the manifest page's "Privacy" section (the destination, what was
 * classified, redacted, withheld and dropped, and the items dropped for privacy: metadata
 * only, never text), and the "DS4: Privacy Policy" answer (`ds4.privacy`) as a one-line
 * message and a Markdown document.
 *
 * A manifest without `privacy` (a server before the privacy policy, or `null`: none recorded)
 * renders no section.
 * Every value from the server is HTML-escaped in the section.
 *
 * Pure module: no `vscode` import.
 */

import { escapeHtml } from './html';
import {
  type Manifest,
  type ManifestItem,
  type PlanResult,
  PRIVACY_EXCLUSION_REASON,
  PRIVACY_LEVELS,
  type PrivacyAnswer,
  type PrivacyDestination,
  type PrivacySummary,
} from './protocol';
import { formatInt } from './status';

/** The items of `manifest.excluded` dropped for privacy (empty when the list is not loaded). */
export function privacyExclusions(manifest: Manifest): ManifestItem[] {
  return (manifest.excluded ?? []).filter((item) => item.reason === PRIVACY_EXCLUSION_REASON);
}

/**
 * The "Privacy" section of the manifest page, as HTML; `''` for a manifest without `privacy`
 * (or with `privacy: null`).
 * At most `maxRows` excluded items are listed; the rest are counted.
 */
export function renderPrivacy(manifest: Manifest, maxRows = 500): string {
  const privacy = manifest.privacy;
  if (privacy === undefined || privacy === null) {
    return '';
  }
  if (!privacy.enabled) {
    return `<section class="privacy">
<h2>Privacy <span class="sub">policy off</span></h2>
<p class="muted">The privacy policy is off (<code>ds4.privacy.enabled</code>): nothing was classified, held back or redacted.</p>
</section>`;
  }
  return `<section class="privacy">
<h2>Privacy <span class="sub">what the destination may see, and what was held back</span></h2>
<p class="meta">${destinationFacts(privacy.destination ?? null).join(' · ')}</p>
${countsTable(privacy)}
${redactedLine(privacy)}
${exclusionsTable(manifest, maxRows)}
</section>`;
}

/** `destination <provider>`, its class (`kind`), the levels it may see, and whether secrets are redacted. */
function destinationFacts(destination: PrivacyDestination | null): string[] {
  if (destination === null) {
    return ['no destination named: texts were classified, not held back or redacted'];
  }
  const provider =
    destination.provider === null
      ? 'destination unknown (treated as remote)'
      : `destination <code>${escapeHtml(destination.provider)}</code>`;
  return [
    provider,
    `<strong>${escapeHtml(destination.kind)}</strong>`,
    destination.allowed.length > 0
      ? `may see ${destination.allowed.map((level) => escapeHtml(level)).join(', ')}`
      : 'may see no level',
    destination.redactSecrets ? 'secrets redacted' : 'secrets not redacted',
  ];
}

/** Levels in the policy's order, then any other level the server reports, sorted. */
function orderedLevels(...counts: (Record<string, number> | undefined)[]): string[] {
  const seen = new Set(counts.flatMap((record) => Object.keys(record ?? {})));
  const known: string[] = PRIVACY_LEVELS.filter((level) => seen.has(level));
  const other = [...seen].filter((level) => !(PRIVACY_LEVELS as readonly string[]).includes(level)).sort();
  return [...known, ...other];
}

/** Per level: texts classified, native segments withheld, supplements dropped whole. */
function countsTable(privacy: PrivacySummary): string {
  const { classified, withheld, excluded } = privacy;
  const levels = orderedLevels(classified, withheld, excluded);
  if (levels.length === 0) {
    return '<p class="muted">Nothing was classified above normal, withheld or dropped.</p>';
  }
  const cell = (record: Record<string, number> | undefined, level: string): string =>
    `<td class="num">${formatInt(record?.[level] ?? 0)}</td>`;
  const rows = levels.map(
    (level) =>
      `<tr><td>${escapeHtml(level)}</td>${cell(classified, level)}${cell(withheld, level)}${cell(excluded, level)}</tr>`,
  );
  return `<table><thead><tr><th>Level</th><th class="num">Classified</th><th class="num">Withheld</th><th class="num">Excluded</th></tr></thead>
<tbody>${rows.join('')}</tbody></table>
<p class="muted">Withheld: parts of the conversation replaced by a notice. Excluded: history evidence, snippets or summaries dropped whole.</p>`;
}

/** `3 secrets redacted: bearer token 2, OpenAI key 1` (kinds by count, largest first). */
function redactedLine(privacy: PrivacySummary): string {
  const total = privacy.redacted ?? 0;
  const kinds = Object.entries(privacy.redactedByKind ?? {})
    .filter(([, count]) => count > 0)
    .sort(([a, x], [b, y]) => y - x || a.localeCompare(b))
    .map(([kind, count]) => `${escapeHtml(kind)} ${formatInt(count)}`);
  if (total === 0 && kinds.length === 0) {
    return '<p class="muted">No secret was redacted.</p>';
  }
  return `<p>${formatInt(total)} secret${total === 1 ? '' : 's'} redacted${kinds.length > 0 ? `: ${kinds.join(', ')}` : ''}.</p>`;
}

/** The items dropped for privacy: kind, source, level and tokens. */
function exclusionsTable(manifest: Manifest, maxRows: number): string {
  if (manifest.excluded === undefined) {
    return '<p class="muted">The item list was not loaded (summary view).</p>';
  }
  const items = privacyExclusions(manifest);
  if (items.length === 0) {
    return '';
  }
  const shown = items.slice(0, maxRows);
  const rows = shown.map(
    (item) =>
      `<tr><td>${escapeHtml(item.kind)}</td><td><code>${escapeHtml(item.sourceId)}</code></td><td>${escapeHtml(item.classification ?? '')}</td><td class="num">${formatInt(item.tokens)}</td></tr>`,
  );
  const more =
    items.length > shown.length ? `<p class="muted">${formatInt(items.length - shown.length)} more not shown.</p>` : '';
  return `<h3>Excluded due to privacy policy <span class="sub">${formatInt(items.length)} items</span></h3>
<table><thead><tr><th>Kind</th><th>Source</th><th>Level</th><th class="num">Tokens</th></tr></thead>
<tbody>${rows.join('')}</tbody></table>${more}`;
}

/** What was held back, summed over the levels: withheld segments, excluded supplements, secrets. */
export function privacyTotals(privacy: PrivacySummary): { withheld: number; excluded: number; redacted: number } {
  const total = (record: Record<string, number> | undefined): number =>
    Object.values(record ?? {}).reduce((sum, count) => sum + count, 0);
  return { withheld: total(privacy.withheld), excluded: total(privacy.excluded), redacted: privacy.redacted ?? 0 };
}

/**
 * One sentence on what the privacy policy held back from a plan, for the "DS4: Plan Request"
 * message: `Privacy (openai, remote): 2 withheld, 1 excluded, 3 secrets redacted.`; `undefined`
 * when it held nothing back (or the server has no privacy).
 */
export function privacyPlanNote(privacy: PrivacySummary | null | undefined): string | undefined {
  if (privacy?.enabled !== true) {
    return undefined;
  }
  const { withheld, excluded, redacted } = privacyTotals(privacy);
  const parts = [
    withheld > 0 && `${formatInt(withheld)} withheld`,
    excluded > 0 && `${formatInt(excluded)} excluded`,
    redacted > 0 && `${formatInt(redacted)} secret${redacted === 1 ? '' : 's'} redacted`,
  ].filter((part): part is string => typeof part === 'string');
  if (parts.length === 0) {
    return undefined;
  }
  const destination = privacy.destination;
  const who = destination ? ` (${destination.provider ?? 'unknown provider'}, ${destination.kind})` : '';
  return `Privacy${who}: ${parts.join(', ')}.`;
}

// ----------------------------------------------------------------------------- ds4.privacy

/**
 * The active policy of `ds4.health` (`privacy`: the `privacy.*` settings) in a few words:
 * `privacy on (local: faux, ollama; remote may see: normal, internal; secrets redacted)`, or
 * `undefined` for a server without privacy.
 */
export function privacyHealthSummary(policy: Record<string, unknown> | undefined): string | undefined {
  if (policy === undefined) {
    return undefined;
  }
  if (policy.enabled === false) {
    return 'privacy off';
  }
  const list = (value: unknown): string =>
    Array.isArray(value) ? levelList(value.filter((item): item is string => typeof item === 'string')) : 'default';
  return (
    `privacy on (local: ${list(policy.localProviders)}; remote may see: ${list(policy.remoteDefaultAllowed)}` +
    `; secrets ${policy.redactSecrets === false ? 'not redacted' : 'redacted'})`
  );
}

/** `provider/model` of the last plan, the default destination to ask about; `''` without one. */
export function defaultPrivacyModel(plan: Pick<PlanResult, 'model'> | undefined): string {
  return plan ? `${plan.model.provider}/${plan.model.id}` : '';
}

/**
 * Why `input` is not a destination, or `undefined` when it is one: `provider/model` (e.g.
 * `openai/gpt-4o`) or a bare provider id (`ollama`), without spaces; the policy decides by
 * the provider.
 */
export function privacyModelProblem(input: string): string | undefined {
  return /^[^/\s]+(\/\S+)?$/.test(input.trim())
    ? undefined
    : 'Give the destination as provider/model or provider, e.g. openai/gpt-4o or ollama.';
}

function levelList(levels: string[]): string {
  return levels.length > 0 ? levels.join(', ') : 'none';
}

/** One line for a notification: `DS4 privacy: openai/gpt-4o is remote; may see ...`. */
export function privacyAnswerSummary(answer: PrivacyAnswer, model: string): string {
  if (!answer.enabled) {
    return `DS4 privacy: the policy is off (ds4.privacy.enabled); ${model} is sent everything unredacted.`;
  }
  return (
    `DS4 privacy: ${model} is ${answer.kind}; may see ${levelList(answer.allowed)}; ` +
    `withheld: ${levelList(answer.withheld)}; secrets ${answer.redactSecrets ? 'redacted' : 'not redacted'}.`
  );
}

/** The answer as a Markdown document: the facts as a table, then the explanation. */
export function renderPrivacyAnswer(answer: PrivacyAnswer, model: string): string {
  const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\s+/g, ' ');
  const rows: [string, string][] = [
    ['Destination', model],
    ['Provider', answer.provider ?? 'unknown (treated as remote)'],
    ['Class', answer.kind],
    ['Policy', answer.enabled ? 'on' : 'off (ds4.privacy.enabled)'],
    ['May see', levelList(answer.allowed)],
    ['Withheld', levelList(answer.withheld)],
    ['Secrets', answer.redactSecrets ? 'redacted' : 'not redacted'],
    ...(answer.rule !== undefined && answer.rule !== '' ? [['Decided by', answer.rule] as [string, string]] : []),
  ];
  return [
    `# DS4 privacy policy for ${model}`,
    '',
    '| | |',
    '|---|---|',
    ...rows.map(([label, value]) => `| ${label} | ${cell(value)} |`),
    '',
    '## Explanation',
    '',
    answer.explanation.trim() === '' ? '(the server gave none)' : answer.explanation.trim(),
    '',
    'Levels, lowest first: normal < internal < sensitive < local-only. Mark text with ' +
      '`[ds4:LEVEL]...[/ds4:LEVEL]`; the `ds4.privacy.*` settings say who may see which level. ' +
      'Markers and secret patterns reduce accidental disclosure; they do not replace keeping ' +
      'secrets out of sessions and repositories.',
    '',
  ].join('\n');
}
