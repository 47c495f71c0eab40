/**
 * The palette commands: "DS4: Rebuild Index", "DS4: Health", "DS4: Show Manifest",
 * "DS4: Plan Request", "DS4: Compact Session", "DS4: Show Summary Graph", "DS4: Copy
 * Compaction Entry", "DS4: Privacy Policy", "DS4: Restart Server", "DS4: Show Output".
 *
 * Their ids are `ds4.client.*`: vscode-languageclient registers the server's own commands
 * (`ds4.rebuildIndex`, `ds4.health`, `ds4.summaries`, `ds4.privacy`) with VS Code itself, and
 * an id can be registered once. The durable-context commands (`memoryCommands.ts`:
 * `ds4.client.pinSelection`, `ds4.client.remember`, `ds4.client.showMemory`,
 * `ds4.client.searchArtifacts`) follow the same rule.
 */

import { homedir } from 'node:os';

import * as vscode from 'vscode';

import {
  compactionEntryJson,
  describeCompactResult,
  describeSummaries,
  NOT_WRITTEN_NOTE,
  renderCompactResult,
  renderSummaries,
} from './compactionView';
import type { ManifestPanel } from './manifestPanel';
import {
  defaultPrivacyModel,
  privacyAnswerSummary,
  privacyHealthSummary,
  privacyModelProblem,
  privacyPlanNote,
  renderPrivacyAnswer,
} from './privacyView';
import type { CompactParams, CompactResult, HealthResult, Manifest, PlanParams, PlanResult } from './protocol';
import type { ReadOnlyDocuments } from './readOnlyDocuments';
import type { WorkDoneProgressValue } from './requests';
import { pathContext, type ServerClient } from './serverClient';
import { piSessionDir, recentSessionFiles } from './sessionFiles';
import { COMMANDS, formatInt } from './status';
import { calibrationHealthLines, calibrationHealthSummary, hasCriticalCalibration } from './usageView';

/** workspaceState key of the last session file used in this workspace. */
const LAST_SESSION_KEY = 'ds4.lastSessionFile';

export interface CommandContext {
  server: ServerClient;
  panel: ManifestPanel;
  output: vscode.LogOutputChannel;
  workspaceState: vscode.Memento;
  /** Plans through the extension API, so `onDidPlan` fires. */
  plan(params: PlanParams): Promise<PlanResult>;
  /** The last plan made in this window. */
  lastPlan(): PlanResult | undefined;
  /** Read-only documents for the compaction views. */
  documents: ReadOnlyDocuments;
  /** Compacts through the extension API (which remembers the result). */
  compact(params: CompactParams): Promise<CompactResult>;
  /** The last compaction prepared in this window. */
  lastCompaction(): CompactResult | undefined;
}

export function registerCommands(context: CommandContext): vscode.Disposable[] {
  const commands: [string, () => Promise<void>][] = [
    [COMMANDS.rebuildIndex, () => rebuildIndex(context)],
    [COMMANDS.health, () => health(context)],
    [COMMANDS.showManifest, () => showManifest(context)],
    [COMMANDS.plan, () => planRequest(context)],
    [COMMANDS.compact, () => compactSession(context)],
    [COMMANDS.summaries, () => showSummaryGraph(context)],
    [COMMANDS.copyCompactionEntry, () => copyCompactionEntry(context)],
    [COMMANDS.privacy, () => privacyPolicy(context)],
    [COMMANDS.restart, () => context.server.restart()],
    [
      COMMANDS.showOutput,
      () => {
        context.output.show(true);
        return Promise.resolve();
      },
    ],
  ];
  return commands.map(([id, run]) =>
    vscode.commands.registerCommand(id, () =>
      run().catch((error: unknown) => {
        reportError(context, error);
      }),
    ),
  );
}

/** The last session file used in this workspace (by a plan or a command), if any. */
export function lastSessionFile(workspaceState: vscode.Memento): string | undefined {
  return workspaceState.get<string>(LAST_SESSION_KEY);
}

export async function rememberSessionFile(workspaceState: vscode.Memento, file: string): Promise<void> {
  await workspaceState.update(LAST_SESSION_KEY, file);
}

async function rebuildIndex(context: CommandContext): Promise<void> {
  const requests = await context.server.requests();
  const showInStatus = context.server.progressListener();
  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: 'DS4: rebuilding the index' },
    (progress) => {
      let reported = 0;
      return requests.rebuildIndex((value: WorkDoneProgressValue) => {
        showInStatus(value);
        if (value.kind !== 'end') {
          const percentage = value.percentage ?? reported;
          progress.report({
            increment: Math.max(0, percentage - reported),
            ...(value.message !== undefined && { message: value.message }),
          });
          reported = Math.max(reported, percentage);
        }
      });
    },
  );
  const summary =
    `DS4: rebuilt ${formatInt(result.sessions)} session(s), ${formatInt(result.entries)} entries ` +
    `in ${formatInt(result.durationMs)} ms.`;
  if (result.failed.length > 0) {
    for (const failure of result.failed) {
      context.output.warn(`DS4: rebuild: ${failure.sessionFile}: ${failure.error}`);
    }
    const choice = await vscode.window.showWarningMessage(
      `${summary} ${formatInt(result.failed.length)} could not be read.`,
      'Show Output',
    );
    if (choice) {
      context.output.show(true);
    }
  } else {
    void vscode.window.showInformationMessage(summary);
  }
  context.server.noteHealth(await requests.health());
}

async function health(context: CommandContext): Promise<void> {
  const requests = await context.server.requests();
  const result = await requests.health();
  context.server.noteHealth(result);
  context.output.info(`DS4: health\n${JSON.stringify(result, null, 2)}`);
  const summary =
    `DS4 ${result.status}: ds4-lsp ${result.server.version}, ${formatInt(result.sessions)} session(s), ` +
    `${formatInt(result.entries)} entries, ${formatInt(result.manifests)} manifests; ` +
    `database ${result.databasePath}; workspace ${result.server.trusted ? 'trusted' : 'not trusted'}` +
    (result.project ? `; project ${projectSummary(result.project)}` : '') +
    (result.privacy ? `; ${privacyHealthSummary(result.privacy) ?? ''}` : '') +
    (result.calibration ? `; ${calibrationHealthSummary(result.calibration) ?? ''}.` : '.');
  if (result.calibration && result.calibration.length > 0) {
    context.output.info(`DS4: calibration by model\n${calibrationHealthLines(result.calibration).join('\n')}`);
  }
  const problems = [...result.notices, ...result.configWarnings, ...(result.warnings ?? [])];
  const show =
    problems.length > 0 || hasCriticalCalibration(result.calibration)
      ? vscode.window.showWarningMessage(`${summary} ${problems.join(' ')}`, 'Show Details')
      : vscode.window.showInformationMessage(summary, 'Show Details');
  if (await show) {
    context.output.show(true);
  }
}

function projectSummary(project: NonNullable<HealthResult['project']>): string {
  return project.files === undefined
    ? project.status
    : `${project.status}, ${formatInt(project.files)} files, ${formatInt(project.snippets ?? 0)} snippets${
        project.commits === undefined ? '' : `, ${formatInt(project.commits)} commits`
      }`;
}

/**
 * Show the manifest of the last plan; without one, the latest stored manifest of the last
 * session used here, or of a session the user picks.
 */
async function showManifest(context: CommandContext): Promise<void> {
  const requests = await context.server.requests();
  const plan = context.lastPlan();
  let manifest: Manifest;
  if (plan) {
    manifest = await requests.manifest({ id: plan.manifestId, view: 'full' });
  } else {
    const file = lastSessionFile(context.workspaceState) ?? (await pickSessionFile(context));
    if (file === undefined) {
      return;
    }
    manifest = await requests.manifest({ session: { file }, latest: true, view: 'full' });
  }
  context.panel.show(manifest, plan?.manifestId === manifest.id ? plan : undefined);
}

/** Ask for a session and a request, plan it, and show the manifest. */
async function planRequest(context: CommandContext): Promise<void> {
  const file = await pickSessionFile(context);
  if (file === undefined) {
    return;
  }
  const request = await vscode.window.showInputBox({
    title: 'DS4: Plan Request',
    prompt: 'The next user message to plan the context for',
    placeHolder: 'e.g. which files did we change for the theme system?',
    ignoreFocusOut: true,
  });
  if (request === undefined) {
    return;
  }
  const plan = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Window, title: 'DS4: planning' },
    () => context.plan({ session: { file }, ...(request.trim() !== '' && { request }) }),
  );
  const requests = await context.server.requests();
  context.panel.show(await requests.manifest({ id: plan.manifestId, view: 'full' }), plan);
  const privacy = privacyPlanNote(plan.privacy);
  const text =
    `DS4 ${plan.mode}: ${formatInt(plan.messages.length)} messages, ` +
    `${formatInt(plan.estimatedTokens)} of ${formatInt(plan.budget.contextWindow)} tokens.` +
    (privacy === undefined ? '' : ` ${privacy}`);
  if (plan.mode === 'fallback' || plan.warnings.length > 0) {
    void vscode.window.showWarningMessage(
      [text, plan.fallbackReason, ...plan.warnings].filter((part) => part !== undefined).join(' '),
    );
  } else {
    void vscode.window.showInformationMessage(text);
  }
}

const COPY_ENTRY = 'Copy Compaction Entry';
const SHOW_GRAPH = 'Show Summary Graph';
const OPEN_DOT = 'Open as Graphviz DOT';

/**
 * Ask for a session (and optional focus), run `ds4/compact` with reason `manual`, and show the
 * result rendered in the Markdown preview (read-only): span, node ids, validation, summarizer, fallback reason, the summary. The
 * extension never writes the session file; the agent (Pi) appends the entry.
 */
async function compactSession(context: CommandContext): Promise<void> {
  const file = await pickSessionFile(context, 'The session to compact');
  if (file === undefined) {
    return;
  }
  const focus = await vscode.window.showInputBox({
    title: 'DS4: Compact Session',
    prompt: 'Optional: what the summary should focus on (Enter for none)',
    placeHolder: 'e.g. the parser refactoring and its open bugs',
    ignoreFocusOut: true,
  });
  if (focus === undefined) {
    return;
  }
  const result = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: 'DS4: compacting the session' },
    () =>
      context.compact({
        session: { file },
        reason: 'manual',
        ...(focus.trim() !== '' && { customInstructions: focus.trim() }),
      }),
  );
  await context.documents.preview(`compaction/${result.summaryId}.md`, renderCompactResult(result, { sessionFile: file }));
  const choice = await vscode.window.showInformationMessage(describeCompactResult(result), COPY_ENTRY, SHOW_GRAPH);
  if (choice === COPY_ENTRY) {
    await copyCompactionEntry(context);
  } else if (choice === SHOW_GRAPH) {
    await showSummaryGraph(context, file);
  }
}

/** Copy the last compaction's entry (one JSON line, Pi's shape) to the clipboard. */
async function copyCompactionEntry(context: CommandContext): Promise<void> {
  const result = context.lastCompaction();
  if (!result) {
    void vscode.window.showInformationMessage('DS4: no compaction was prepared in this window yet (run "DS4: Compact Session").');
    return;
  }
  await vscode.env.clipboard.writeText(compactionEntryJson(result));
  void vscode.window.showInformationMessage(
    `DS4: copied the compaction entry of ${result.summaryId}. ${NOT_WRITTEN_NOTE.replace(/`/g, '')}`,
  );
}

/** Show a session's summary graph as a read-only text tree, offering its Graphviz DOT. */
async function showSummaryGraph(context: CommandContext, sessionFile?: string): Promise<void> {
  const file = sessionFile ?? (await pickSessionFile(context, 'The session whose summary graph to show'));
  if (file === undefined) {
    return;
  }
  const requests = await context.server.requests();
  const result = await requests.summaries({ session: { file }, format: 'dot' });
  await context.documents.show(`summaries/${result.sessionId}.txt`, renderSummaries(result), 'plaintext');
  const choice = await vscode.window.showInformationMessage(describeSummaries(result), OPEN_DOT);
  if (choice === OPEN_DOT) {
    await context.documents.show(`summaries/${result.sessionId}.dot`, result.dot ?? '', 'dot');
  }
}

/**
 * Ask for a destination (`provider/model` or `provider`, default the last plan's model) and show what the
 * server's privacy policy lets it see (`ds4.privacy`): a one-line message and, read-only, the
 * answer with its explanation.
 */
async function privacyPolicy(context: CommandContext): Promise<void> {
  const model = await vscode.window.showInputBox({
    title: 'DS4: Privacy Policy',
    prompt: 'The destination model: what may it see?',
    placeHolder: 'provider/model or provider, e.g. openai/gpt-4o or ollama',
    value: defaultPrivacyModel(context.lastPlan()),
    validateInput: (value) => privacyModelProblem(value),
    ignoreFocusOut: true,
  });
  if (model === undefined) {
    return;
  }
  const problem = privacyModelProblem(model);
  if (problem !== undefined) {
    void vscode.window.showWarningMessage(`DS4: ${problem}`);
    return;
  }
  const destination = model.trim();
  const requests = await context.server.requests();
  const answer = await requests.privacy({ model: destination });
  const name = destination.replace(/[^\w.-]+/g, '_');
  await context.documents.show(`privacy/${name}.md`, renderPrivacyAnswer(answer, destination), 'markdown');
  void vscode.window.showInformationMessage(privacyAnswerSummary(answer, destination));
}

/** The workspace's recent Pi sessions, the last one used, or a file chosen in a dialog. */
async function pickSessionFile(
  context: CommandContext,
  placeHolder = 'The session to plan or inspect',
): Promise<string | undefined> {
  const folder = pathContext().workspaceFolder;
  const recent = folder ? recentSessionFiles(piSessionDir(folder, process.env, homedir())) : [];
  const last = lastSessionFile(context.workspaceState);
  const files = [...new Set([...(last ? [last] : []), ...recent.map((file) => file.path)])];
  let file: string | undefined;
  if (files.length > 0) {
    const items: (vscode.QuickPickItem & { path?: string })[] = [
      ...files.map((path) => ({
        label: path.split(/[/\\]/).pop() ?? path,
        description: path === last ? 'last used' : '',
        detail: path,
        path,
      })),
      { label: '$(folder-opened) Choose a session file…' },
    ];
    const picked = await vscode.window.showQuickPick(items, {
      title: 'DS4: Pi session',
      placeHolder,
    });
    if (picked === undefined) {
      return undefined;
    }
    file = picked.path;
  }
  if (file === undefined) {
    const chosen = await vscode.window.showOpenDialog({
      title: 'DS4: choose a Pi session file',
      canSelectMany: false,
      filters: { 'Pi session': ['jsonl'] },
    });
    file = chosen?.[0]?.fsPath;
  }
  if (file !== undefined) {
    await rememberSessionFile(context.workspaceState, file);
  }
  return file;
}

/** Log `error` and show it, offering the output (every command's failure path). */
export function reportError(context: Pick<CommandContext, 'output'>, error: unknown): void {
  const text = error instanceof Error ? error.message : String(error);
  context.output.error(text);
  if (typeof error === 'object' && error !== null && (error as { reported?: unknown }).reported === true) {
    return; // already shown to the user (e.g. with a choice to act on it)
  }
  void vscode.window.showErrorMessage(text.startsWith('DS4') ? text : `DS4: ${text}`, 'Show Output').then((choice) => {
    if (choice) {
      context.output.show(true);
    }
  });
}
