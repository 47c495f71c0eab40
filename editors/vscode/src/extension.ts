/**
 * The DS4 extension: starts `ds4-lsp`, shows its state in the status bar, adds the palette
 * commands and the `ds4_retrieve_history` language model tool, answers the server's
 * `ds4/summarize` with an editor chat model (`serverClient.ts`, `summarize.ts`), and returns
 * `Ds4Api` to other extensions.
 */

import * as vscode from 'vscode';

import type { Ds4Api } from './api';
import { lastSessionFile, registerCommands, rememberSessionFile } from './commands';
import { formatHistoryForModel, HISTORY_TOOL_NAME, type HistoryToolInput, historyToolParams, toolInvocationMessage, toolScopes } from './historyTool';
import { ManifestPanel } from './manifestPanel';
import { registerMemoryCommands } from './memoryCommands';
import { MemoryPanel } from './memoryPanel';
import { ensureOrAsk, OwnedSession } from './ownedSession';
import type { CompactParams, CompactResult, Manifest, PlanParams, PlanResult, SessionOpenResult, SessionRef, UsageParams } from './protocol';
import { ReadOnlyDocuments } from './readOnlyDocuments';
import { ServerClient } from './serverClient';
import { compactionDestination, historyToolDestination } from './settings';
import { presentStatus, type StatusState } from './status';
import { showError } from './notify';

let server: ServerClient | undefined;

export function activate(context: vscode.ExtensionContext): Ds4Api {
  const output = vscode.window.createOutputChannel('DS4', { log: true });
  server = new ServerClient(output);
  const panel = new ManifestPanel();
  const documents = new ReadOnlyDocuments();
  const planEmitter = new vscode.EventEmitter<PlanResult>();
  let lastPlan: PlanResult | undefined;
  let lastCompaction: CompactResult | undefined;
  const running = server;
  const memoryPanel = new MemoryPanel();
  const owned = new OwnedSession(context.workspaceState, async (params) => (await running.requests()).sessionOpen(params));
  /**
   * The last Pi session used in this window, else the workspace's server-owned session. With
   * `ask` (palette commands), a stored session that cannot be reopened is shown with the
   * choice to start a new one; API callers get the rejection.
   */
  const defaultSession = async (ask = false): Promise<{ session: SessionRef; owned: boolean }> => {
    const last = lastSessionFile(context.workspaceState);
    if (last !== undefined) {
      return { session: { file: last }, owned: last === owned.stored?.file };
    }
    return { session: { file: (ask ? await ownedOrAsk(owned) : await owned.ensure()).file }, owned: true };
  };
  const sessionOf = async (session: SessionRef | undefined): Promise<SessionRef> => session ?? (await defaultSession()).session;

  const api: Ds4Api = {
    async plan(params: PlanParams): Promise<PlanResult> {
      const result = await (await running.requests()).plan(params);
      lastPlan = result;
      running.notePlan(result);
      if (result.session && result.session.file !== lastSessionFile(context.workspaceState)) {
        await rememberSessionFile(context.workspaceState, result.session.file);
      }
      planEmitter.fire(result);
      if (panel.isOpen) {
        // An open manifest view follows the latest plan; the caller does not wait for it.
        running
          .requests()
          .then((requests) => requests.manifest({ id: result.manifestId, view: 'full' }))
          .then((manifest) => {
            panel.refresh(manifest, result);
          })
          .catch((error: unknown) => {
            output.warn(`DS4: refreshing the manifest view: ${String(error)}`);
          });
      }
      return result;
    },
    async retrieve(params = {}) {
      return (await running.requests()).retrieve(params);
    },
    async manifest(params) {
      return (await running.requests()).manifest(params);
    },
    async toolExecuted(params) {
      await (await running.requests()).toolExecuted(params);
    },
    async compact(params: CompactParams): Promise<CompactResult> {
      // The summary prompt goes to a VS Code chat model: name it, unless the caller did.
      const destination = params.model ?? compactionDestination(vscode.workspace.getConfiguration('ds4'));
      const result = await (await running.requests()).compact(destination ? { ...params, model: destination } : params);
      lastCompaction = result;
      if (params.session.file !== lastSessionFile(context.workspaceState)) {
        await rememberSessionFile(context.workspaceState, params.session.file);
      }
      return result;
    },
    async summaries(params) {
      return (await running.requests()).summaries(params);
    },
    async compactCommitted(summaryId, entryId) {
      await (await running.requests()).compactCommitted(summaryId, entryId);
    },
    async compactFailed(summaryId, reason) {
      await (await running.requests()).compactFailed(summaryId, reason);
    },
    async privacy(params) {
      return (await running.requests()).privacy(params);
    },
    async reportUsage(params: UsageParams): Promise<void> {
      const requests = await running.requests();
      await requests.usage(params);
      if (panel.manifestId === params.manifestId) {
        // The open view of that plan shows the actual tokens; the caller does not wait for it.
        const plan = panel.plan;
        refreshedManifest(() => requests.manifest({ id: params.manifestId, view: 'full' }))
          .then((manifest) => {
            panel.refresh(manifest, plan);
          })
          .catch((error: unknown) => {
            output.warn(`DS4: refreshing the manifest view after ds4/usage: ${String(error)}`);
          });
      }
    },
    async continuationFailed(params) {
      await (await running.requests()).continuationFailed(params);
    },
    async pin(params) {
      return (await running.requests()).pin({ ...params, session: await sessionOf(params.session) });
    },
    async unpin(params) {
      return (await running.requests()).unpin({ ...params, session: await sessionOf(params.session) });
    },
    async remember(params) {
      return (await running.requests()).remember({ ...params, session: await sessionOf(params.session) });
    },
    async forget(params) {
      return (await running.requests()).forget({ ...params, session: await sessionOf(params.session) });
    },
    async memory(params = {}) {
      return (await running.requests()).memory(params);
    },
    async artifactSearch(params) {
      return (await running.requests()).artifactSearch(params);
    },
    async sessionOpen(params) {
      if (params === undefined || Object.keys(params).length === 0) {
        return owned.ensure();
      }
      return (await running.requests()).sessionOpen(params);
    },
    async sessionAppend(params) {
      const session = params.session ?? { file: (await owned.ensure()).file };
      return (await running.requests()).sessionAppend({ ...params, session });
    },
    onDidPlan: planEmitter.event,
  };

  const statusItem = vscode.window.createStatusBarItem('ds4.status', vscode.StatusBarAlignment.Left, 10);
  statusItem.name = 'DS4';
  const showStatus = (state: StatusState): void => {
    const presentation = presentStatus(state);
    statusItem.text = presentation.text;
    statusItem.tooltip = presentation.tooltip;
    statusItem.command = presentation.command;
    statusItem.backgroundColor =
      presentation.severity === 'normal'
        ? undefined
        : new vscode.ThemeColor(`statusBarItem.${presentation.severity}Background`);
    statusItem.show();
  };
  showStatus(running.state);

  context.subscriptions.push(
    output,
    running,
    panel,
    documents,
    planEmitter,
    statusItem,
    running.onDidChangeStatus(showStatus),
    ...registerCommands({
      server: running,
      panel,
      output,
      workspaceState: context.workspaceState,
      plan: (params) => api.plan(params),
      lastPlan: () => lastPlan,
      documents,
      compact: (params) => api.compact(params),
      lastCompaction: () => lastCompaction,
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration('ds4')) {
        running.onSettingsChanged().catch((error: unknown) => {
          output.error(`DS4: applying settings: ${String(error)}`);
        });
      }
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      running.onTrustGranted().catch((error: unknown) => {
        output.error(`DS4: applying workspace trust: ${String(error)}`);
      });
    }),
    memoryPanel,
    ...registerMemoryCommands({ server: running, output, documents, panel: memoryPanel, defaultSession: () => defaultSession(true) }),
    registerHistoryTool(running, context.workspaceState, owned),
  );

  void running.start();
  return api;
}

export async function deactivate(): Promise<void> {
  await server?.stop();
  server = undefined;
}

/**
 * The manifest after a `ds4/usage` report: `ds4/usage` is a notification the server may still
 * be storing when the next request arrives, so a manifest without `actualTokens` is asked
 * for again, up to 5 times 100 ms apart (the last answer is returned either way).
 */
async function refreshedManifest(fetch: () => Promise<Manifest>): Promise<Manifest> {
  let manifest = await fetch();
  for (let attempt = 0; attempt < 5 && manifest.actualTokens === null; attempt += 1) {
    await new Promise((resolveLater) => setTimeout(resolveLater, 100));
    manifest = await fetch();
  }
  return manifest;
}

/**
 * The `ds4_retrieve_history` tool: `ds4/retrieve` for chat agents. Without a `sessionFile`
 * input it searches the last Pi session used in this window, else the workspace's
 * server-owned session (opened if needed; none when the server cannot open one).
 */
function registerHistoryTool(running: ServerClient, workspaceState: vscode.Memento, owned: OwnedSession): vscode.Disposable {
  return vscode.lm.registerTool<HistoryToolInput>(HISTORY_TOOL_NAME, {
    prepareInvocation(options) {
      const query = typeof options.input.query === 'string' ? options.input.query : '';
      return {
        invocationMessage: toolInvocationMessage(options.input),
        // In an untrusted workspace a prompt could steer the agent at any local .jsonl file:
        // let the user see which one before it is read.
        ...(!vscode.workspace.isTrusted && {
          confirmationMessages: {
            title: 'Search DS4 session history?',
            message: `Query: "${query}"\nSession: ${options.input.sessionFile ?? lastSessionFile(workspaceState) ?? owned.stored?.file ?? '(the DS4-owned session)'}`,
          },
        }),
      };
    },
    async invoke(options) {
      // The answer goes to a chat model: name it as the destination, so the server sanitizes
      // the hits for it (remote unless ds4.privacy.historyToolProvider is a local provider).
      const destination = historyToolDestination(vscode.workspace.getConfiguration('ds4'));
      const last = lastSessionFile(workspaceState);
      let parsed = historyToolParams(options.input, last, destination);
      if ('error' in parsed && last === undefined) {
        // No Pi session used here: the workspace's owned session, if the server opens one.
        const ownedFile = await ownedSessionFile(owned);
        if (ownedFile !== undefined) {
          parsed = historyToolParams(options.input, ownedFile, destination);
        }
      }
      if ('error' in parsed) {
        throw new Error(parsed.error);
      }
      const result = await (await running.requests()).retrieve(parsed.params);
      const budget = options.tokenizationOptions?.tokenBudget;
      const maxChars = budget !== undefined && budget > 0 ? budget * 4 : undefined;
      return new vscode.LanguageModelToolResult([
        new vscode.LanguageModelTextPart(formatHistoryForModel(result, maxChars, toolScopes(parsed.params))),
      ]);
    },
  });
}

const START_NEW_SESSION = 'Start a New Session';

/** The owned session for a palette command; a failed reopen offers "Start a New Session". */
function ownedOrAsk(owned: OwnedSession): Promise<SessionOpenResult> {
  return ensureOrAsk(owned, async (message) => (await showError(message, START_NEW_SESSION)) === START_NEW_SESSION);
}

/** The file of the workspace's owned session; `undefined` when the server cannot open one. */
async function ownedSessionFile(owned: OwnedSession): Promise<string | undefined> {
  try {
    return (await owned.ensure()).file;
  } catch {
    // A server without ds4/sessionOpen: the tool says there is no session.
    return undefined;
  }
}
