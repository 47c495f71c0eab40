/**
 * From VS Code settings (`ds4.*`) to what the server receives: the server's settings
 * (docs/configuration.md), `initializationOptions` and `workspace/didChangeConfiguration`
 * params, and the command line that starts `ds4-lsp`.
 *
 * Pure module: it reads settings through `SettingsReader` (in the extension,
 * `vscode.workspace.getConfiguration('ds4')`; in tests, a Map), so it runs in plain node.
 */

import type { InitializationOptions } from './protocol';

/** Reads one `ds4.*` setting by its key below `ds4` (e.g. `context.mode`). */
export interface SettingsReader {
  get(key: string): unknown;
}

/**
 * The `ds4.*` settings that are server settings, by their server key (`ds4.context.mode` is
 * the server's `context.mode`). The defaults are in package.json and equal the server's
 * (a unit test compares package.json with docs/configuration.md). Left out on purpose:
 * `retrieval.semantic` (only `false` is accepted in this version) and
 * `storage.databasePath` (the client sends `ds4.databasePath` as `databasePath`).
 */
export const SERVER_SETTING_KEYS: readonly string[] = [
  'enabled',
  'context.mode',
  'context.targetFillRatio',
  'context.softLimitRatio',
  'context.hardLimitRatio',
  'context.minimumOutputReserve',
  'context.preferredOutputReserve',
  'context.recentTailTokens',
  'context.rescueImmediatePredecessor',
  'context.maxRetrievedHistoryTokens',
  'context.maxProjectTokens',
  'context.maxSummaryTokens',
  'context.maxPinnedTokens',
  'context.maxMemoryTokens',
  'retrieval.exact',
  'retrieval.fts',
  'retrieval.maxResults',
  'project.enabled',
  'project.maxFiles',
  'project.maxFileBytes',
  'project.maxTotalBytes',
  'project.maxResults',
  'project.maxCommits',
  'artifacts.enabled',
  'artifacts.maxInlineToolResultChars',
  'artifacts.excerptChars',
  'artifacts.maxArtifactBytes',
  'artifacts.maxSearchBytes',
  'artifacts.maxSearchMatches',
  'memory.enabled',
  'memory.maxPinChars',
  'memory.maxClaimChars',
  'memory.maxResults',
  'compaction.enabled',
  'compaction.keepRecentTokens',
  'compaction.summaryTokenLimit',
  'compaction.maxRequestInputTokens',
  'compaction.summarizeTimeoutMs',
  'modelAwareness.enabled',
  'modelAwareness.overrides',
  'modelAwareness.calibrationWindow',
  'modelAwareness.minimumCalibrationSamples',
  'modelAwareness.calibrationRatioLowerBound',
  'modelAwareness.calibrationRatioUpperBound',
  'nativeContinuation.enabled',
  'nativeContinuation.allowProviderStorage',
  'nativeContinuation.profiles',
  'nativeContinuation.maxStateAgeMs',
  'nativeContinuation.retryManagedReplay',
  'diagnostics.storeContextManifest',
  'diagnostics.logLevel',
  'storage.busyTimeoutMs',
  'privacy.enabled',
  'privacy.defaultClassification',
  'privacy.localProviders',
  'privacy.remoteDefaultAllowed',
  'privacy.remoteProviders',
  'privacy.redactSecrets',
];

/**
 * `ds4.*` settings read by the client only. Changing any of them restarts the server,
 * because they decide how it is started (`initializationOptions` are read once).
 */
export const LAUNCH_SETTING_KEYS: readonly string[] = [
  'server.command',
  'server.pythonPath',
  'server.args',
  'databasePath',
];

/**
 * `ds4.*` settings of the extension itself, never sent to the server:
 * `compaction.useEditorModel` (answer the server's `ds4/summarize` with a VS Code chat model;
 * declared at `initialize`, so changing it restarts the server), `compaction.modelFamily`
 * (which model family to ask; read at each request) and `privacy.historyToolProvider` (the
 * destination the `#ds4History` tool names in `ds4/retrieve`; read at each call).
 */
export const CLIENT_SETTING_KEYS: readonly string[] = [
  'compaction.useEditorModel',
  'compaction.modelFamily',
  'privacy.historyToolProvider',
];

/**
 * The provider id ds4 names for VS Code's chat models (`vscode.lm`, e.g. GitHub Copilot). Not
 * among the server's default `privacy.localProviders`, so they are remote destinations.
 */
export const EDITOR_MODEL_PROVIDER = 'vscode-lm';

/** The default `ds4.privacy.historyToolProvider`: VS Code's chat models (remote). */
export const DEFAULT_HISTORY_TOOL_PROVIDER = EDITOR_MODEL_PROVIDER;

/**
 * The destination the `#ds4History` tool sends as `ds4/retrieve`'s `model`: the chat model
 * that reads the tool's answer. `ds4.privacy.historyToolProvider` trimmed, else
 * `DEFAULT_HISTORY_TOOL_PROVIDER` (an empty or non-string value never means "no
 * destination": without one the server would not sanitize the hits).
 */
export function historyToolDestination(settings: SettingsReader): { provider: string } {
  return { provider: nonEmptyString(settings.get('privacy.historyToolProvider')) ?? DEFAULT_HISTORY_TOOL_PROVIDER };
}

/**
 * The destination to name in `ds4/compact` (`model`) when the caller named none: with
 * `compaction.useEditorModel` on, a VS Code chat model reads the `ds4/summarize` prompt, so
 * `{provider: 'vscode-lm'}` (the server then writes the prompt for that destination, not for
 * the session's own model, which may be a local one); off, `undefined` (the server summarizes
 * offline and nothing leaves).
 */
export function compactionDestination(settings: SettingsReader): { provider: string } | undefined {
  return settings.get('compaction.useEditorModel') === false ? undefined : { provider: EDITOR_MODEL_PROVIDER };
}

/**
 * Why the server could not be started, for the status bar and the output: `launch.command`
 * and the error, plus what to do. A command that does not exist (`ENOENT`) gets the install
 * hint, and in a remote window (`remoteName` = `vscode.env.remoteName`, e.g. `ssh-remote`,
 * `wsl`, `codespaces`) the reason it most often happens there: the launch settings are
 * `machine-overridable`, so VS Code ignores their values in the local User settings and the
 * server, which runs on the remote machine, falls back to `ds4-lsp` on that machine's PATH.
 */
export function serverStartFailure(command: string, error: unknown, remoteName?: string): string {
  const text = error instanceof Error ? error.message : String(error);
  if (!text.includes('ENOENT')) {
    return `cannot start '${command}': ${text}`;
  }
  const found =
    `cannot start '${command}': not found. Install ds4-lsp (./scripts/demo.sh in a clone of ` +
    'the ds4-lsp repository, or pip install ./core . there) and set "ds4.server.command" to ' +
    'its path, or "ds4.server.pythonPath" to a Python that has it.';
  if (!remoteName) {
    return found;
  }
  const keys = LAUNCH_SETTING_KEYS.map((key) => `"ds4.${key}"`).join(', ');
  return (
    `${found} This is a remote window (${remoteName}): the server runs on the remote machine, ` +
    `and VS Code ignores ${keys} in your local User settings here (they are machine ` +
    'settings). Set them, as paths on the remote machine, in the Remote settings ' +
    '("Preferences: Open Remote Settings") or in the workspace settings.'
  );
}

/** The default `ds4.server.command`: `ds4-lsp` found on PATH. */
export const DEFAULT_SERVER_COMMAND = 'ds4-lsp';

/** Where paths in settings are resolved: the user's home and the first workspace folder. */
export interface PathContext {
  homeDir: string;
  workspaceFolder?: string;
}

/** How to start the server: an executable and its arguments. Stdio is the transport. */
export interface ServerLaunch {
  command: string;
  args: string[];
}

/**
 * The server settings as a nested object (`{context: {mode: "managed"}, ...}`), one entry
 * per key of `SERVER_SETTING_KEYS` that has a value. Values are passed as read: the server
 * validates them and reports each invalid one (it is then ignored), which says more than a
 * check here could.
 */
export function readServerSettings(settings: SettingsReader): Record<string, unknown> {
  const nested: Record<string, unknown> = {};
  for (const key of SERVER_SETTING_KEYS) {
    const value = settings.get(key);
    if (value !== undefined) {
      setNested(nested, key.split('.'), plainJson(value));
    }
  }
  return nested;
}

/**
 * `initializationOptions` for `initialize`: workspace trust as VS Code decided it, the server
 * settings, and `databasePath` when `ds4.databasePath` is set (`~`, `${userHome}` and
 * `${workspaceFolder}` expanded).
 */
export function buildInitializationOptions(
  trusted: boolean,
  settings: SettingsReader,
  paths: PathContext,
): InitializationOptions {
  const options: InitializationOptions = { trusted, settings: readServerSettings(settings) };
  const databasePath = nonEmptyString(settings.get('databasePath'));
  if (databasePath !== undefined) {
    options.databasePath = expandPath(databasePath, paths);
  }
  return options;
}

/**
 * `workspace/didChangeConfiguration` params carrying the current settings and trust. The
 * server applies the settings over its current ones and reads `trusted` as the editor's trust
 * decision (docs/protocol.md, "Trust"); `trusted` is not a setting.
 */
export function buildConfigurationChange(
  trusted: boolean,
  settings: SettingsReader,
): { settings: { ds4: Record<string, unknown> } } {
  return { settings: { ds4: { ...readServerSettings(settings), trusted } } };
}

/**
 * The command that starts the server. `ds4.server.pythonPath`, when set, runs
 * `<python> -m ds4_lsp`; otherwise `ds4.server.command` (default `ds4-lsp`). `ds4.server.args`
 * are appended (e.g. `["--log-level", "debug"]`). Paths may use `~`, `${userHome}` and
 * `${workspaceFolder}`.
 *
 * Stdio is the transport, but no `--stdio` flag is added: `ds4-lsp` always speaks stdio and
 * rejects unknown flags (so the extension never sets `TransportKind.stdio`, which would
 * append one).
 */
export function resolveServerLaunch(settings: SettingsReader, paths: PathContext): ServerLaunch {
  const extraArgs = stringArray(settings.get('server.args'));
  const python = nonEmptyString(settings.get('server.pythonPath'));
  if (python !== undefined) {
    return { command: expandPath(python, paths), args: ['-m', 'ds4_lsp', ...extraArgs] };
  }
  const command = nonEmptyString(settings.get('server.command')) ?? DEFAULT_SERVER_COMMAND;
  return { command: expandPath(command, paths), args: extraArgs };
}

/**
 * A string that changes exactly when the server must be restarted to apply the settings:
 * the launch command, the database path, and `compaction.useEditorModel` (the client
 * capabilities are declared once, at `initialize`).
 */
export function launchKey(settings: SettingsReader, paths: PathContext): string {
  const launch = resolveServerLaunch(settings, paths);
  const databasePath = buildInitializationOptions(false, settings, paths).databasePath ?? null;
  const editorModel = settings.get('compaction.useEditorModel') !== false;
  return JSON.stringify([launch.command, launch.args, databasePath, editorModel]);
}

/**
 * `~` or `~/...` at the start, `${userHome}` and `${workspaceFolder}` anywhere. A path with
 * `${workspaceFolder}` and no folder open is returned with the variable left in, so the
 * error the user sees names it.
 */
export function expandPath(path: string, paths: PathContext): string {
  let expanded = path.trim();
  if (expanded === '~' || expanded.startsWith('~/')) {
    expanded = paths.homeDir + expanded.slice(1);
  }
  expanded = expanded.split('${userHome}').join(paths.homeDir);
  if (paths.workspaceFolder !== undefined) {
    expanded = expanded.split('${workspaceFolder}').join(paths.workspaceFolder);
  }
  return expanded;
}

function nonEmptyString(value: unknown): string | undefined {
  return typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined;
}

function stringArray(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}

function setNested(target: Record<string, unknown>, path: string[], value: unknown): void {
  const [head, ...rest] = path;
  if (head === undefined) {
    return;
  }
  if (rest.length === 0) {
    target[head] = value;
    return;
  }
  const child = target[head];
  const next: Record<string, unknown> =
    typeof child === 'object' && child !== null ? (child as Record<string, unknown>) : {};
  target[head] = next;
  setNested(next, rest, value);
}

/** A plain JSON copy: VS Code hands out read-only proxies for object settings. */
function plainJson(value: unknown): unknown {
  return typeof value === 'object' && value !== null
    ? (JSON.parse(JSON.stringify(value)) as unknown)
    : value;
}
