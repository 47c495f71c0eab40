/**
 * The running `ds4-lsp`: starts it with `vscode-languageclient` over stdio, restarts it when a
 * launch setting changes, sends settings and workspace trust, answers `ds4/summarize` with an
 * editor chat model when `ds4.compaction.useEditorModel` is on, and keeps the status state
 * (starting, indexing, ready, untrusted, error, stopped) that the status bar shows.
 */

import { homedir } from 'node:os';
import { createInterface } from 'node:readline';

import * as vscode from 'vscode';
import {
  type ClientCapabilities,
  DidChangeConfigurationNotification,
  type Executable,
  type FeatureState,
  LanguageClient,
  type LanguageClientOptions,
  State,
  type StaticFeature,
  WorkDoneProgress,
  WorkDoneProgressCreateRequest,
} from 'vscode-languageclient/node';

import { Ds4Requests, type ProgressListener } from './requests';
import { stderrLineLevel } from './serverLog';
import { createSummarizeHandler, offersSummarize, SummarizeFeature, type SummarizeHandler, type SummaryModel } from './summarize';
import {
  buildConfigurationChange,
  buildInitializationOptions,
  launchKey,
  type PathContext,
  readServerSettings,
  resolveServerLaunch,
  serverStartFailure,
  type SettingsReader,
} from './settings';
import { applyProgress, type StatusState } from './status';
import { DS4_INDEX_UPDATED, type HealthResult, isIndexUpdated, type PlanResult } from './protocol';

const CLIENT_ID = 'ds4';
const CLIENT_NAME = 'DS4';
/** Plans refresh the status tooltip's index counts at most this often (ms). */
const HEALTH_REFRESH_MS = 10_000;

export class ServerClient implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private starting: Promise<void> | undefined;
  /** When the status last got a `ds4.health` answer (ms since the epoch). */
  private healthAt = 0;
  /** Sessions planned since the last `ds4.health` answer. */
  private readonly plannedSessions = new Set<string>();
  /** `launchKey` of the last start attempt, whether it succeeded or not. */
  private attemptedLaunchKey: string | undefined;
  private status: StatusState = { phase: { kind: 'stopped' }, trusted: vscode.workspace.isTrusted };
  private readonly statusEmitter = new vscode.EventEmitter<StatusState>();
  /** Fires whenever the status state changes. */
  readonly onDidChangeStatus = this.statusEmitter.event;
  /** Answers `ds4/summarize` with an editor chat model. */
  private readonly summarize: SummarizeHandler;

  constructor(private readonly output: vscode.LogOutputChannel) {
    this.summarize = editorModelSummarizer(output);
  }

  get state(): StatusState {
    return this.status;
  }

  /** Start the server unless it is running or starting; resolves when it is up (or failed). */
  start(): Promise<void> {
    this.starting ??= this.startClient().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  /** Stop the server (if any) and start it again with the current settings. */
  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.dispose(5000);
      } catch (error) {
        this.output.warn(`DS4: stopping the server: ${message(error)}`);
      }
    }
    this.update({ phase: { kind: 'stopped' } });
  }

  /** Requests to the running server; starts it first if needed. Rejects when it cannot run. */
  async requests(): Promise<Ds4Requests> {
    if (!this.client?.isRunning()) {
      await this.start();
    }
    const client = this.client;
    if (!client?.isRunning()) {
      const phase = this.status.phase;
      throw new Error(
        phase.kind === 'error' ? `DS4: ${phase.message}` : 'DS4: the ds4-lsp server is not running',
      );
    }
    return new Ds4Requests(client);
  }

  /**
   * A `ds4.*` setting changed. A changed launch setting restarts the server (or retries a
   * start that failed, e.g. after the user fixed `ds4.server.command`); other settings are
   * sent to the running server.
   */
  async onSettingsChanged(): Promise<void> {
    await this.starting;
    if (launchKey(settings(), pathContext()) !== this.attemptedLaunchKey) {
      if (this.client !== undefined || this.status.phase.kind === 'error') {
        this.output.info('DS4: server launch settings changed; restarting ds4-lsp');
        await this.restart();
      }
      return;
    }
    await this.sendSettings();
  }

  /**
   * The user trusted the workspace. Restricted settings (server command, database path) may
   * now have workspace values, which needs a restart; otherwise the server is told with
   * `workspace/didChangeConfiguration` carrying `trusted: true`.
   */
  async onTrustGranted(): Promise<void> {
    this.update({ trusted: true });
    await this.onSettingsChanged();
  }

  /**
   * Record the latest plan for the status tooltip. A plan indexes its session first, so the
   * index counts are refreshed too: at once for a session not planned before, else at most
   * every `HEALTH_REFRESH_MS`.
   */
  notePlan(plan: PlanResult): void {
    this.update({ lastPlan: plan });
    const newSession = plan.session !== undefined && !this.plannedSessions.has(plan.session.id);
    if (plan.session) {
      this.plannedSessions.add(plan.session.id);
    }
    if (newSession || Date.now() - this.healthAt > HEALTH_REFRESH_MS) {
      void this.refreshHealth('after a plan');
    }
  }

  /** Record a `ds4.health` answer for the status tooltip. */
  noteHealth(health: HealthResult): void {
    this.healthAt = Date.now();
    this.update({ health });
  }

  /** A progress listener that shows a command's `$/progress` in the status state. */
  progressListener(): ProgressListener {
    return (value) => {
      this.status = applyProgress(this.status, value);
      this.statusEmitter.fire(this.status);
    };
  }

  dispose(): void {
    void this.stop();
    this.statusEmitter.dispose();
  }

  private async startClient(): Promise<void> {
    await this.stop();
    const paths = pathContext();
    const launch = resolveServerLaunch(settings(), paths);
    const key = launchKey(settings(), paths);
    // No `transport`: with TransportKind.stdio the client would append `--stdio`, which
    // ds4-lsp rejects; without one it still talks over the process's stdin/stdout.
    const executable: Executable = {
      command: launch.command,
      args: launch.args,
      options: { cwd: paths.workspaceFolder ?? homedir(), env: process.env },
    };
    const client = new LanguageClient(CLIENT_ID, CLIENT_NAME, executable, this.clientOptions());
    const summarize = new SummarizeFeature(
      { onRequest: (method, handler) => client.onRequest(method, handler) },
      () => offersSummarize(settings(), languageModelApi()),
      this.summarize,
    );
    client.registerFeature(summarize);
    client.registerFeature(new ServerProgressFeature(client, this.progressListener()));
    client.onNotification(DS4_INDEX_UPDATED, (params: unknown) => {
      if (isIndexUpdated(params)) {
        this.update({ project: params });
      }
    });
    client.onDidChangeState((event) => {
      if (this.client !== client) {
        return;
      }
      if (event.newState === State.Starting) {
        this.update({ phase: { kind: 'starting' } });
      } else if (event.newState === State.Stopped && this.status.phase.kind !== 'error') {
        this.update({ phase: { kind: 'stopped' } });
      }
    });
    this.client = client;
    this.attemptedLaunchKey = key;
    this.update({ phase: { kind: 'starting' }, trusted: vscode.workspace.isTrusted });
    this.output.info(`DS4: starting ${[launch.command, ...launch.args].join(' ')}`);
    try {
      await client.start();
    } catch (error) {
      // Keep no half-started client: the next request, a launch setting change or
      // "DS4: Restart Server" tries again.
      this.client = undefined;
      this.update({ phase: { kind: 'error', message: startFailure(launch.command, error) } });
      this.output.error(`DS4: ${startFailure(launch.command, error)}`);
      client.dispose().catch(() => undefined);
      return;
    }
    this.update({ phase: { kind: 'ready' } });
    this.output.info(
      summarize.isDeclared
        ? 'DS4: compaction summaries are written by an editor chat model (ds4/summarize offered)'
        : 'DS4: compaction summaries are written offline by the server (ds4/summarize not offered)',
    );
    await this.refreshHealth('after start');
  }

  /** Ask the running server for `ds4.health` for the status tooltip; failures are logged. */
  private async refreshHealth(when: string): Promise<void> {
    const client = this.client;
    if (!client?.isRunning()) {
      return;
    }
    try {
      this.noteHealth(await new Ds4Requests(client).health());
    } catch (error) {
      this.output.warn(`DS4: health check ${when}: ${message(error)}`);
    }
  }

  private clientOptions(): LanguageClientOptions {
    return {
      // Open files are synced so the server can mark project snippets that changed after
      // they were sent to a model (diagnostics, hover); session files it reads itself.
      documentSelector: [{ scheme: 'file' }],
      outputChannel: this.output,
      initializationOptions: () =>
        buildInitializationOptions(vscode.workspace.isTrusted, settings(), pathContext()),
      initializationFailedHandler: (error) => {
        this.update({ phase: { kind: 'error', message: `initialize failed: ${message(error)}` } });
        return false;
      },
      middleware: {
        workspace: {
          // The server asks for section `ds4` when a configuration change carries no
          // settings; answer with server settings only, not the client's launch settings.
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            if (!Array.isArray(answers)) {
              return answers;
            }
            return params.items.map((item, index): unknown =>
              item.section === 'ds4' ? readServerSettings(settings()) : answers[index],
            );
          },
        },
      },
      stdioOptions: {
        stdout: (input, channel) => {
          forEachLine(input, (line) => {
            channel.info(line);
          });
        },
        stderr: (input, channel) => {
          forEachLine(input, (line) => {
            channel[stderrLineLevel(line)](line);
          });
        },
      },
    };
  }

  private async sendSettings(): Promise<void> {
    const client = this.client;
    if (!client?.isRunning()) {
      return;
    }
    await client.sendNotification(
      DidChangeConfigurationNotification.type,
      buildConfigurationChange(vscode.workspace.isTrusted, settings()),
    );
    await this.refreshHealth('after a settings change');
  }

  private update(change: Partial<StatusState>): void {
    this.status = { ...this.status, ...change };
    this.statusEmitter.fire(this.status);
  }
}

/**
 * Shows progress the server starts itself (the background index of a trusted workspace, or a
 * `ds4.rebuildIndex` run from another extension) in the status state. It answers
 * `window/workDoneProgress/create` in place of vscode-languageclient's own handler, which
 * would show a notification: features are initialised in order, and this one is registered
 * last, on every (re)start.
 */
class ServerProgressFeature implements StaticFeature {
  constructor(
    private readonly client: LanguageClient,
    private readonly listener: ProgressListener,
  ) {}

  fillClientCapabilities(capabilities: ClientCapabilities): void {
    capabilities.window = { ...capabilities.window, workDoneProgress: true };
  }

  initialize(): void {
    this.client.onRequest(WorkDoneProgressCreateRequest.type, ({ token }) => {
      const subscription = this.client.onProgress(WorkDoneProgress.type, token, (value) => {
        this.listener(value);
        if (value.kind === 'end') {
          subscription.dispose();
        }
      });
    });
  }

  getState(): FeatureState {
    return { kind: 'static' };
  }

  clear(): void {
    // Nothing to undo: the client drops its handlers when it stops.
  }
}

/** Whether this VS Code has the language model API (`vscode.lm.selectChatModels`). */
function languageModelApi(): boolean {
  const lm = (vscode as { lm?: Partial<typeof vscode.lm> }).lm;
  return typeof lm?.selectChatModels === 'function';
}

/** The `ds4/summarize` handler over `vscode.lm`, with `ds4.compaction.modelFamily`. */
function editorModelSummarizer(output: vscode.LogOutputChannel): SummarizeHandler {
  return createSummarizeHandler({
    lm: {
      selectChatModels: (selector): Thenable<readonly SummaryModel[]> => vscode.lm.selectChatModels(selector),
      userMessage: (text) => vscode.LanguageModelChatMessage.User(text),
    },
    modelFamily: () => {
      const family = settings().get('compaction.modelFamily');
      return typeof family === 'string' ? family : undefined;
    },
    log: output,
  });
}

/** The `ds4` settings section, read fresh (VS Code returns a snapshot). */
export function settings(): SettingsReader {
  return vscode.workspace.getConfiguration('ds4');
}

export function pathContext(): PathContext {
  const folder = vscode.workspace.workspaceFolders?.[0];
  return {
    homeDir: homedir(),
    ...(folder?.uri.scheme === 'file' && { workspaceFolder: folder.uri.fsPath }),
  };
}

function startFailure(command: string, error: unknown): string {
  return serverStartFailure(command, error, vscode.env.remoteName);
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function forEachLine(input: NodeJS.ReadableStream, handle: (line: string) => void): void {
  createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 }).on('line', handle);
}
