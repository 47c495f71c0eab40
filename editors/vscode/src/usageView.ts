/**
 * Model awareness in the views (docs/model-awareness.md): what a provider reported for a
 * planned call (`ds4/usage`: actual against estimated input tokens, the cache share, output
 * tokens, the stop reason), the model's calibration (ratio, samples, drift warnings), a model
 * switch and the native continuation decision, as HTML for the manifest webview; and each
 * profile's calibration and cache share of `ds4.health` as text.
 *
 * The server's objects are read defensively (the guards in `protocol.ts` only check that they
 * are objects): a missing or mistyped field shows as `-`, never breaks the page. Every value
 * is HTML-escaped.
 *
 * Pure module: no `vscode` import.
 */

import { escapeHtml } from './html';
import type { Calibration, Continuation, HealthCalibration, Manifest, ManifestUsage, ModelAwareness } from './protocol';
import { formatInt } from './status';

/** What the "Actual input" card of the manifest view says: value and detail (HTML). */
export function actualInputCard(manifest: Manifest): { value: string; detail: string } {
  if (manifest.actualTokens === null) {
    return { value: 'not reported', detail: 'the provider has not reported usage' };
  }
  const usage = manifest.usage ?? null;
  const share = usage ? cacheShareOf(usage) : null;
  const facts = [
    vsEstimate(manifest.actualTokens, manifest.estimatedTokens),
    share !== null && `cache share ${formatShare(share)}`,
    usage && `reported by ${escapeHtml(`${text(usage.provider)}/${text(usage.model)}`)}`,
  ].filter(isText);
  return { value: `${formatInt(manifest.actualTokens)} tokens`, detail: facts.join('; ') };
}

/**
 * `+2.1% vs the 36,349-token estimate` (actual over estimated); `the estimate was 36,349`
 * when there is no estimate to divide by.
 */
export function vsEstimate(actual: number, estimated: number): string {
  if (estimated <= 0) {
    return `the estimate was ${formatInt(estimated)}`;
  }
  const percent = (100 * (actual - estimated)) / estimated;
  const sign = percent > 0 ? '+' : percent < 0 ? '−' : '±';
  return `${sign}${Math.abs(percent).toFixed(1)}% vs the ${formatInt(estimated)}-token estimate`;
}

/**
 * The cache share of a usage report: its `cacheShare`, else `cacheRead / (input + cacheRead +
 * cacheWrite)`; `null` when there was no input.
 */
export function cacheShareOf(usage: Partial<ManifestUsage>): number | null {
  if (typeof usage.cacheShare === 'number') {
    return usage.cacheShare;
  }
  const input = count(usage.input) + count(usage.cacheRead) + count(usage.cacheWrite);
  return input > 0 ? count(usage.cacheRead) / input : null;
}

/** `83.5%` of a share in 0..1; `-` for `null`. */
export function formatShare(share: number | null | undefined): string {
  return typeof share === 'number' && Number.isFinite(share) ? `${(100 * share).toFixed(1)}%` : '-';
}

/**
 * The "Model awareness" section of the manifest view: the usage the provider reported (or
 * that it has not), the model's calibration with its warnings, a model switch, and the
 * continuation decision. Empty for a server without model awareness (none of `usage`,
 * `modelAwareness`, `continuation` in the manifest).
 */
export function renderModelAwareness(manifest: Manifest): string {
  if (manifest.usage === undefined && manifest.modelAwareness === undefined && manifest.continuation === undefined) {
    return '';
  }
  const awareness = manifest.modelAwareness ?? null;
  const parts = [
    renderSwitch(awareness),
    renderUsage(manifest),
    renderCalibration(awareness),
    renderContinuation(manifest.continuation ?? null),
  ].filter(isText);
  return `<section class="model-awareness">
<h2>Model awareness <span class="sub">what the provider reported, and how the estimate is calibrated</span></h2>
${parts.join('\n')}
</section>`;
}

function renderUsage(manifest: Manifest): string {
  const usage = manifest.usage ?? null;
  if (usage === null) {
    return '<p class="muted">Usage: the provider has not reported usage for this plan (<code>ds4/usage</code>).</p>';
  }
  const actual = manifest.actualTokens ?? count(usage.input) + count(usage.cacheRead) + count(usage.cacheWrite);
  const rows = [
    ['Actual input', formatInt(actual), vsEstimate(actual, manifest.estimatedTokens)],
    ['Estimated input', formatInt(manifest.estimatedTokens), `estimator <code>${escapeHtml(text(manifest.estimatorVersion))}</code>`],
    ['Uncached input', tokens(usage.input), ''],
    ['Cache read', tokens(usage.cacheRead), ''],
    ['Cache write', tokens(usage.cacheWrite), ''],
    ['Cache share', formatShare(cacheShareOf(usage)), 'cache reads over all input tokens'],
    ['Output', tokens(usage.output), ''],
    ['Stop reason', escapeHtml(text(usage.stopReason)), ''],
  ].map(([label, value, detail]) => `<tr><td>${label ?? ''}</td><td class="num">${value ?? ''}</td><td class="muted">${detail ?? ''}</td></tr>`);
  const who = `${text(usage.provider)}/${text(usage.model)}`;
  return `<h3>Usage <span class="sub">reported by <code>${escapeHtml(who)}</code>${
    typeof usage.reportedAt === 'string' ? ` at ${escapeHtml(usage.reportedAt)}` : ''
  }</span></h3>
<table class="usage"><tbody>${rows.join('')}</tbody></table>`;
}

function renderCalibration(awareness: ModelAwareness | null): string {
  // `null`: not looked up (the plan's provider is unknown); no reports yet is a calibration
  // with `samples: 0`; absent: a server before calibration.
  const calibration = awareness?.calibration;
  if (calibration === undefined) {
    return '';
  }
  if (calibration === null) {
    return '<p class="muted">Calibration: not looked up (the plan\'s provider is unknown).</p>';
  }
  const warnings = Array.isArray(calibration.warnings) ? calibration.warnings : [];
  const list =
    warnings.length > 0
      ? `<ul class="calibration-warnings">${warnings
          .map(
            (warning) =>
              `<li class="sev-${warning.severity === 'critical' ? 'critical' : 'warning'}"><strong>${escapeHtml(
                text(warning.severity),
              )}</strong> <code>${escapeHtml(text(warning.code))}</code>: ${escapeHtml(text(warning.message))}</li>`,
          )
          .join('')}</ul>`
      : '';
  return `<h3>Calibration <span class="sub"><code>${escapeHtml(`${text(calibration.provider)}/${text(calibration.model)}`)}</code>${
    typeof awareness?.estimatorVersion === 'string' ? `, estimator <code>${escapeHtml(awareness.estimatorVersion)}</code>` : ''
  }</span></h3>
<p>${escapeHtml(calibrationLine(calibration))}</p>
${list}`;
}

/**
 * One profile's calibration in words: `ratio 1.080 · calibrated from 5 accepted samples
 * (7 in the window, 2 outliers)`, `ratio 1.000 · not calibrated: 1 of 3 accepted samples` (of
 * the `minimumSamples` the server gives, else `1 of 2 samples accepted`), or `ratio 1.000 ·
 * not calibrated: no usage reported yet (needs 3 accepted samples)` when `samples` is 0.
 */
export function calibrationLine(calibration: Partial<Calibration>): string {
  const ratio = typeof calibration.ratio === 'number' ? calibration.ratio.toFixed(3) : '-';
  const accepted = count(calibration.accepted);
  const samples = count(calibration.samples);
  const outliers = count(calibration.outliers);
  const minimum = typeof calibration.minimumSamples === 'number' ? calibration.minimumSamples : undefined;
  const state =
    calibration.calibrated === true
      ? `calibrated from ${formatInt(accepted)} accepted samples (${formatInt(samples)} in the window, ${formatInt(outliers)} outlier${outliers === 1 ? '' : 's'})`
      : samples === 0
        ? `not calibrated: no usage reported yet${minimum === undefined ? '' : ` (needs ${formatInt(minimum)} accepted samples)`}`
        : minimum !== undefined
          ? `not calibrated: ${formatInt(accepted)} of ${formatInt(minimum)} accepted samples`
          : `not calibrated: ${formatInt(accepted)} of ${formatInt(samples)} samples accepted`;
  return `ratio ${ratio} · ${state}`;
}

function renderSwitch(awareness: ModelAwareness | null): string {
  const change = awareness?.modelSwitch ?? null;
  if (change === null) {
    return '';
  }
  return `<p class="switch"><strong>Model switch:</strong> switched from <code>${escapeHtml(text(change.from))}</code> to <code>${escapeHtml(
    text(change.to),
  )}</code>; this plan used the new model's own limits and calibration.</p>`;
}

function renderContinuation(continuation: Continuation | null): string {
  if (continuation === null) {
    return '';
  }
  const mode = text(continuation.mode);
  const start = typeof continuation.deltaStart === 'number' ? formatInt(continuation.deltaStart) : '-';
  const what =
    mode === 'delta'
      ? `<strong>delta</strong>: send the messages from index ${start} on after the previous response`
      : `<strong>${escapeHtml(mode)}</strong>: send the whole request`;
  const reason = typeof continuation.reason === 'string' && continuation.reason !== '' ? ` (reason: <code>${escapeHtml(continuation.reason)}</code>)` : '';
  return `<p class="continuation"><strong>Continuation</strong> <code>${escapeHtml(text(continuation.strategy))}</code>: ${what}${reason}.</p>`;
}

/**
 * The profiles of `ds4.health`'s `calibration` as one sentence for the Health message:
 * `calibration: anthropic/claude-sonnet-4-5 ratio 1.080, calibrated (5 samples), cache share
 * 83.5%; openai/gpt-5 ratio 1.000, 1 of 3 accepted samples, 1 warning` (of the server's
 * `minimumSamples`). `undefined` for a server
 * without model awareness; `calibration: no usage reported yet` for an empty list.
 */
export function calibrationHealthSummary(profiles: HealthCalibration[] | undefined): string | undefined {
  if (profiles === undefined) {
    return undefined;
  }
  if (profiles.length === 0) {
    return 'calibration: no usage reported yet';
  }
  const parts = profiles.map((profile) => {
    const warnings = Array.isArray(profile.warnings) ? profile.warnings.length : 0;
    const samples =
      profile.calibrated
        ? `calibrated (${formatInt(count(profile.accepted))} samples)`
        : typeof profile.minimumSamples === 'number'
          ? `${formatInt(count(profile.accepted))} of ${formatInt(profile.minimumSamples)} accepted samples`
          : `not calibrated (${formatInt(count(profile.accepted))} of ${formatInt(count(profile.samples))} samples accepted)`;
    return [
      `${text(profile.provider)}/${text(profile.model)} ratio ${typeof profile.ratio === 'number' ? profile.ratio.toFixed(3) : '-'}`,
      samples,
      `cache share ${formatShare(profile.cacheShare)}`,
      warnings > 0 && `${String(warnings)} warning${warnings === 1 ? '' : 's'}`,
    ]
      .filter(isText)
      .join(', ');
  });
  return `calibration: ${parts.join('; ')}`;
}

/**
 * Each profile of `ds4.health`'s `calibration` on its own lines, for the DS4 output: the
 * profile and estimator, the calibration line, the cache share and last report, then each
 * warning with its severity.
 */
export function calibrationHealthLines(profiles: HealthCalibration[]): string[] {
  return profiles.flatMap((profile) => [
    `${text(profile.provider)}/${text(profile.model)} (${text(profile.estimatorVersion)}): ${calibrationLine(profile)}; cache share ${formatShare(
      profile.cacheShare,
    )}; last report ${text(profile.lastReportedAt)}`,
    ...(Array.isArray(profile.warnings) ? profile.warnings : []).map(
      (warning) => `  ${text(warning.severity)} ${text(warning.code)}: ${text(warning.message)}`,
    ),
  ]);
}

/** Whether any profile has a `critical` warning (the Health message is then a warning). */
export function hasCriticalCalibration(profiles: HealthCalibration[] | undefined): boolean {
  return (profiles ?? []).some(
    (profile) => Array.isArray(profile.warnings) && profile.warnings.some((warning) => warning.severity === 'critical'),
  );
}

/** The style rules of the section (appended to the manifest page's style block). */
export const MODEL_AWARENESS_STYLE = `
h3 { font-size: 1em; margin: 14px 0 6px; font-weight: 600; }
.model-awareness table.usage { width: auto; min-width: 420px; }
.calibration-warnings { padding-left: 18px; }
.calibration-warnings li { margin: 2px 0; }
.sev-warning strong { color: var(--vscode-editorWarning-foreground, #cca700); }
.sev-critical strong { color: var(--vscode-errorForeground, #f48771); }
.switch { border-left: 3px solid var(--vscode-charts-blue, #1a85ff); padding-left: 10px; }
`;

function tokens(value: unknown): string {
  return typeof value === 'number' && Number.isFinite(value) ? formatInt(value) : '-';
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;
}

function text(value: unknown): string {
  return typeof value === 'string' && value !== '' ? value : '-';
}

function isText(value: string | false | null | undefined): value is string {
  return typeof value === 'string' && value !== '';
}
