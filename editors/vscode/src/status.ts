/**
 * What the status bar item says: the server's state (starting, indexing with a percentage,
 * ready, untrusted, error, stopped) as text, tooltip, colour and click command.
 *
 * Pure module: no `vscode` import. `extension.ts` copies a `StatusPresentation` onto a
 * `vscode.StatusBarItem`.
 */

import type { HealthResult, IndexUpdatedParams, PlanResult } from './protocol';
import type { WorkDoneProgressValue } from './requests';

export type Phase =
  | { kind: 'starting' }
  /**
   * Server work with `$/progress`: `percentage` 0..100 when the server reports one; `message`
   * e.g. `3/10 sessions`; `compacting` when it is a compaction (`ds4/compact`), not indexing.
   */
  | { kind: 'indexing'; percentage?: number; message?: string; compacting?: boolean }
  | { kind: 'ready' }
  | { kind: 'error'; message: string }
  | { kind: 'stopped' };

export interface StatusState {
  phase: Phase;
  /** VS Code's workspace trust. */
  trusted: boolean;
  /** The latest `ds4.health` answer, if any. */
  health?: Pick<HealthResult, 'status' | 'sessions' | 'entries' | 'databasePath' | 'configWarnings' | 'notices' | 'warnings'>;
  /** The latest plan made through this extension. */
  lastPlan?: Pick<PlanResult, 'mode' | 'estimatedTokens' | 'manifestId' | 'budget'>;
  /** The latest project sync (`ds4/indexUpdated`), in a trusted workspace. */
  project?: Pick<IndexUpdatedParams, 'status' | 'reason' | 'error' | 'filesIndexed' | 'snippets' | 'truncated'>;
}

export interface StatusPresentation {
  /** With `$(icon)` syntax. */
  text: string;
  /** Plain text, one fact per line. */
  tooltip: string;
  /** Background colour: `error` and `warning` map to the status bar theme colours. */
  severity: 'normal' | 'warning' | 'error';
  /** Command run on click. */
  command: string;
}

/** Ids of the extension's own commands (the server's are `ds4.rebuildIndex`, `ds4.health`). */
export const COMMANDS = {
  rebuildIndex: 'ds4.client.rebuildIndex',
  health: 'ds4.client.health',
  showManifest: 'ds4.client.showManifest',
  plan: 'ds4.client.plan',
  restart: 'ds4.client.restartServer',
  showOutput: 'ds4.client.showOutput',
  compact: 'ds4.client.compact',
  summaries: 'ds4.client.summaries',
  copyCompactionEntry: 'ds4.client.copyCompactionEntry',
  privacy: 'ds4.client.privacy',
  pinSelection: 'ds4.client.pinSelection',
  remember: 'ds4.client.remember',
  showMemory: 'ds4.client.showMemory',
  searchArtifacts: 'ds4.client.searchArtifacts',
} as const;

/** VS Code's own command that opens the workspace trust editor. */
export const MANAGE_TRUST_COMMAND = 'workbench.trust.manage';

/** The state after a `$/progress` value of a running command. */
export function applyProgress(state: StatusState, value: WorkDoneProgressValue): StatusState {
  if (value.kind === 'end') {
    return { ...state, phase: { kind: 'ready' } };
  }
  const previous = state.phase.kind === 'indexing' ? state.phase : undefined;
  const percentage = value.percentage ?? previous?.percentage;
  const message = value.message ?? previous?.message;
  const compacting = value.kind === 'begin' ? /\bcompact/i.test(value.title) : previous?.compacting === true;
  return {
    ...state,
    phase: {
      kind: 'indexing',
      ...(percentage !== undefined && { percentage }),
      ...(message !== undefined && { message }),
      ...(compacting && { compacting }),
    },
  };
}

/** Text, tooltip, colour and click command for `state`. */
export function presentStatus(state: StatusState): StatusPresentation {
  const { phase } = state;
  switch (phase.kind) {
    case 'starting':
      return {
        text: '$(sync~spin) DS4 starting',
        tooltip: 'DS4: starting the ds4-lsp server',
        severity: 'normal',
        command: COMMANDS.showOutput,
      };
    case 'indexing': {
      const percentage =
        phase.percentage === undefined ? '' : ` ${String(Math.round(clamp(phase.percentage, 0, 100)))}%`;
      return {
        text: `$(sync~spin) DS4 ${phase.compacting ? 'compacting' : 'indexing'}${percentage}`,
        tooltip: lines(phase.compacting ? 'DS4: compacting a session' : 'DS4: indexing session history', phase.message),
        severity: 'normal',
        command: COMMANDS.showOutput,
      };
    }
    case 'error':
      return {
        text: '$(error) DS4 error',
        tooltip: lines(`DS4: ${phase.message}`, 'Click to show the DS4 output.'),
        severity: 'error',
        command: COMMANDS.showOutput,
      };
    case 'stopped':
      return {
        text: '$(circle-slash) DS4 stopped',
        tooltip: 'DS4: the ds4-lsp server is not running. Click to restart it.',
        severity: 'warning',
        command: COMMANDS.restart,
      };
    case 'ready':
      return presentReady(state);
  }
}

function presentReady(state: StatusState): StatusPresentation {
  const { health, lastPlan, project } = state;
  const facts = [
    project && projectFact(project),
    project?.truncated && 'The project hit project.maxFiles or project.maxTotalBytes: some files are not indexed.',
    health &&
      `${plural(health.sessions, 'session')}, ${plural(health.entries, 'entry', 'entries')} indexed`,
    health && `Database: ${health.databasePath}`,
    health && health.configWarnings.length > 0 && `${plural(health.configWarnings.length, 'setting')} ignored (see DS4: Health)`,
    health && health.notices.length > 0 && `${plural(health.notices.length, 'database notice')} (see DS4: Health)`,
    ...(health?.warnings ?? []),
    lastPlan &&
      `Last plan: ${formatInt(lastPlan.estimatedTokens)} of ${formatInt(lastPlan.budget.contextWindow)} tokens (${lastPlan.mode}), ${lastPlan.manifestId}`,
  ];
  if (!state.trusted) {
    return {
      text: '$(shield) DS4 untrusted',
      tooltip: lines(
        'DS4: restricted mode. Session history works; project knowledge stays off until you trust this workspace.',
        ...facts,
        'Click to manage workspace trust.',
      ),
      severity: 'warning',
      command: MANAGE_TRUST_COMMAND,
    };
  }
  const warning = health?.status === 'warning' || project?.status === 'error';
  return {
    text: `${warning ? '$(warning)' : '$(database)'} DS4 ready`,
    tooltip: lines('DS4: ready', ...facts, 'Click to show the last manifest.'),
    severity: warning ? 'warning' : 'normal',
    command: COMMANDS.showManifest,
  };
}

function projectFact(project: NonNullable<StatusState['project']>): string {
  if (project.status === 'error') {
    return `Project index error: ${project.error ?? 'unknown'} (last sync: ${project.reason})`;
  }
  if (project.status !== 'ready') {
    return `Project index: ${project.status}`;
  }
  return `Project index: ready; last sync (${project.reason}) re-read ${plural(project.filesIndexed, 'file')}, ${plural(project.snippets, 'snippet')} written`;
}

/** `12345` -> `12,345` (the same on every machine, unlike `toLocaleString`). */
export function formatInt(value: number): string {
  const sign = value < 0 ? '-' : '';
  return sign + String(Math.round(Math.abs(value))).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

function plural(count: number, one: string, many = `${one}s`): string {
  return `${formatInt(count)} ${count === 1 ? one : many}`;
}

function lines(...parts: (string | false | undefined)[]): string {
  return parts.filter((part): part is string => typeof part === 'string' && part !== '').join('\n');
}

function clamp(value: number, low: number, high: number): number {
  return Math.min(high, Math.max(low, value));
}
