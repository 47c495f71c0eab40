/**
 * The palette commands for durable context: "DS4: Pin Selection", "DS4: Remember...", "DS4:
 * Show Memory", "DS4: Search Artifacts", and the memory page's action links (supersede,
 * forget, unpin).
 *
 * They act on the default session (`defaultSession`): the last Pi session used in this
 * window, else the workspace's server-owned session. For an owned session the server appends
 * the entry itself (`appended`); a Pi session is never written by ds4 (Pi writes it), so the
 * write is only prepared: the message says how it gets recorded (the agent's Pi extension
 * calls `pi.appendEntry`, or the user appends the entry line) and offers to copy or show the
 * complete entry line. A write the server refuses (`RequestFailed`) is shown with its message;
 * a conflicting claim or pin (not a repeat) offers "Supersede", which asks again with
 * `supersedes` set to the conflicting item.
 */

import * as vscode from 'vscode';

import { reportError } from './commands';
import type { MemoryPanel } from './memoryPanel';
import {
  type MemoryAction,
  memorySummary,
  MEMORY_ACTION_COMMAND,
  mutationEntryJson,
  mutationNote,
  parseMemoryAction,
  refusedWrite,
  renderArtifactSearch,
  supersedeTarget,
} from './memoryView';
import type { ContextMutationResult, MemoryScope, PinScope, SessionRef } from './protocol';
import type { ReadOnlyDocuments } from './readOnlyDocuments';
import type { ServerClient } from './serverClient';
import { COMMANDS } from './status';
import { showInfo, showWarning } from './notify';

export interface MemoryCommandContext {
  server: ServerClient;
  output: vscode.LogOutputChannel;
  documents: ReadOnlyDocuments;
  panel: MemoryPanel;
  /** The session to write to and list: the last Pi session used here, else the owned one. */
  defaultSession(): Promise<{ session: SessionRef; owned: boolean }>;
}

const COPY_ENTRY = 'Copy Entry';
const SHOW_ENTRY = 'Show Entry';
const SUPERSEDE = 'Supersede';

export function registerMemoryCommands(context: MemoryCommandContext): vscode.Disposable[] {
  const commands: [string, (...args: unknown[]) => Promise<void>][] = [
    [COMMANDS.pinSelection, () => pinSelection(context)],
    [COMMANDS.remember, () => remember(context)],
    [COMMANDS.showMemory, () => showMemory(context)],
    [COMMANDS.searchArtifacts, () => searchArtifacts(context)],
    [MEMORY_ACTION_COMMAND, (argument) => memoryAction(context, argument)],
  ];
  return commands.map(([id, run]) =>
    vscode.commands.registerCommand(id, (...args: unknown[]) =>
      run(...args).catch((error: unknown) => {
        reportError(context, error);
      }),
    ),
  );
}

const PIN_SCOPE_ITEMS: (vscode.QuickPickItem & { scope: PinScope })[] = [
  { label: 'session', description: 'every plan of this session', scope: 'session' },
  { label: 'branch', description: 'plans of the active branch only', scope: 'branch' },
  { label: 'project', description: 'every session of this project', scope: 'project' },
];

const MEMORY_SCOPE_ITEMS: (vscode.QuickPickItem & { scope: MemoryScope })[] = [
  { label: 'project', description: 'every session of this project', scope: 'project' },
  { label: 'session', description: 'this session only', scope: 'session' },
];

/** Pin the selection (or the cursor's line) of the active editor, in a scope the user picks. */
async function pinSelection(context: MemoryCommandContext): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor) {
    void showInfo('DS4: open a file and select the text to pin.');
    return;
  }
  const selection = editor.selection;
  const content = selection.isEmpty ? editor.document.lineAt(selection.active.line).text : editor.document.getText(selection);
  if (content.trim() === '') {
    void showInfo('DS4: the selection is empty; select the text to pin.');
    return;
  }
  const picked = await vscode.window.showQuickPick(PIN_SCOPE_ITEMS, {
    title: 'DS4: Pin Selection',
    placeHolder: 'Where the pin applies',
  });
  if (picked === undefined) {
    return;
  }
  const { session } = await context.defaultSession();
  const sourceFile = editor.document.uri.scheme === 'file' ? editor.document.uri.fsPath : undefined;
  await write(context, 'pin', (supersedes) =>
    context.server.requests().then((requests) =>
      requests.pin({
        session,
        content,
        scope: picked.scope,
        ...(sourceFile !== undefined && { sourceFile }),
        ...(supersedes !== undefined && { supersedes }),
      }),
    ),
  );
}

/** Ask for a claim (the selection, when one line, as a start) and its scope, and remember it. */
async function remember(context: MemoryCommandContext): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  const selected = editor && !editor.selection.isEmpty ? editor.document.getText(editor.selection).trim() : '';
  const claim = await vscode.window.showInputBox({
    title: 'DS4: Remember...',
    prompt: 'A short claim about the project, e.g. "retries defaults to 3"',
    value: selected.includes('\n') ? '' : selected,
    validateInput: (value) => (value.trim() === '' ? 'Write the claim to remember.' : undefined),
    ignoreFocusOut: true,
  });
  if (claim === undefined || claim.trim() === '') {
    return;
  }
  const picked = await vscode.window.showQuickPick(MEMORY_SCOPE_ITEMS, {
    title: 'DS4: Remember...',
    placeHolder: 'Where the claim applies',
  });
  if (picked === undefined) {
    return;
  }
  const { session } = await context.defaultSession();
  await write(context, 'memory', (supersedes) =>
    context.server.requests().then((requests) =>
      requests.remember({
        session,
        claim: claim.trim(),
        scope: picked.scope,
        ...(supersedes !== undefined && { supersedes }),
      }),
    ),
  );
}

/** List the default session's pins and memory (inactive ones too) in the memory page. */
async function showMemory(context: MemoryCommandContext): Promise<void> {
  const { session, owned } = await context.defaultSession();
  const result = await (await context.server.requests()).memory({ session, includeInactive: true });
  context.panel.show({ result, session, owned });
  context.output.info(`DS4: memory of ${session.file}: ${memorySummary(result)}`);
}

/** Re-list the memory page's session, if the page is open. */
async function refreshMemory(context: MemoryCommandContext): Promise<void> {
  const shown = context.panel.shown;
  if (shown) {
    const result = await (await context.server.requests()).memory({ session: shown.session, includeInactive: true });
    context.panel.show({ ...shown, result });
  }
}

/** A link of the memory page: supersede, forget or unpin the item, then re-list. */
async function memoryAction(context: MemoryCommandContext, argument: unknown): Promise<void> {
  const action = parseMemoryAction(argument);
  const shown = context.panel.shown;
  if (action === undefined || shown === undefined) {
    return;
  }
  const session = shown.session;
  const done = await runAction(context, session, action);
  if (done) {
    await refreshMemory(context);
  }
}

async function runAction(context: MemoryCommandContext, session: SessionRef, action: MemoryAction): Promise<boolean> {
  const requests = await context.server.requests();
  if (action.action === 'supersede') {
    const item = action.kind === 'memory' ? context.panel.item('memory', action.id) : context.panel.item('pin', action.id);
    const current = item === undefined ? '' : 'claim' in item ? item.claim : item.content;
    const text = await vscode.window.showInputBox({
      title: `DS4: supersede ${action.kind} ${action.id}`,
      prompt: action.kind === 'memory' ? 'The claim that replaces it' : 'The text that replaces it',
      value: current,
      validateInput: (value) => (value.trim() === '' ? 'Write the new text.' : undefined),
      ignoreFocusOut: true,
    });
    if (text === undefined || text.trim() === '') {
      return false;
    }
    if (action.kind === 'memory') {
      const scope = context.panel.item('memory', action.id)?.scope ?? 'project';
      return write(context, 'memory', () => requests.remember({ session, claim: text.trim(), scope, supersedes: action.id }));
    }
    const scope = context.panel.item('pin', action.id)?.scope ?? 'session';
    return write(context, 'pin', () => requests.pin({ session, content: text, scope, supersedes: action.id }));
  }
  const reason = await vscode.window.showInputBox({
    title: action.action === 'forget' ? `DS4: forget memory ${action.id}` : `DS4: unpin ${action.id}`,
    prompt: 'Why (optional; Enter for no reason, Escape to cancel)',
    ignoreFocusOut: true,
  });
  if (reason === undefined) {
    return false;
  }
  const why = reason.trim() === '' ? {} : { reason: reason.trim() };
  return action.action === 'forget'
    ? write(context, 'memory', () => requests.forget({ session, memoryId: action.id, ...why }))
    : write(context, 'pin', () => requests.unpin({ session, pinId: action.id, ...why }));
}

/**
 * Send a write (`send(supersedes?)`) and tell the user what became of it. A refused write is
 * shown with the server's message; a conflict (`supersedeTarget`) offers "Supersede",
 * which sends the write again with `supersedes` set to it. Whether something was recorded.
 */
async function write(
  context: MemoryCommandContext,
  what: string,
  send: (supersedes?: string) => Promise<ContextMutationResult>,
): Promise<boolean> {
  let result: ContextMutationResult;
  try {
    result = await send();
  } catch (error: unknown) {
    const refused = refusedWrite(error);
    if (refused === undefined) {
      throw error;
    }
    const conflict = supersedeTarget(refused);
    if (conflict === undefined) {
      void showWarning(`DS4: ${refused.message}`);
      return false;
    }
    const choice = await showWarning(`DS4: ${refused.message}`, SUPERSEDE);
    if (choice !== SUPERSEDE) {
      return false;
    }
    result = await send(conflict);
  }
  await showMutation(context, result, what);
  return true;
}

/** Say where the entry went: appended to the owned session, or prepared only (copy or show the entry line). */
async function showMutation(context: MemoryCommandContext, result: ContextMutationResult, what: string): Promise<void> {
  const note = mutationNote(result, what);
  context.output.info(note);
  if (result.appended) {
    void showInfo(note);
    void refreshMemory(context).catch((error: unknown) => {
      context.output.warn(`DS4: refreshing the memory view: ${String(error)}`);
    });
    return;
  }
  const choice = await showInfo(note, COPY_ENTRY, SHOW_ENTRY);
  if (choice === COPY_ENTRY) {
    await vscode.env.clipboard.writeText(mutationEntryJson(result));
    void showInfo(`DS4: copied the ${result.customType} entry of ${result.itemId}.`);
  } else if (choice === SHOW_ENTRY) {
    await context.documents.show(`entries/${result.itemId}.json`, `${JSON.stringify(JSON.parse(mutationEntryJson(result)), null, 2)}\n`, 'json');
  }
}

/** Ask for a query and search the stored tool outputs the default session references. */
async function searchArtifacts(context: MemoryCommandContext): Promise<void> {
  const query = await vscode.window.showInputBox({
    title: 'DS4: Search Artifacts',
    prompt: "Literal text to find in the session's stored tool outputs (case-insensitive)",
    placeHolder: 'e.g. AssertionError or test_parse_config',
    validateInput: (value) => (value.trim() === '' ? 'Write the text to look for.' : value.length > 1000 ? 'At most 1,000 characters.' : undefined),
    ignoreFocusOut: true,
  });
  if (query === undefined || query.trim() === '') {
    return;
  }
  const { session } = await context.defaultSession();
  const result = await (await context.server.requests()).artifactSearch({ query: query.trim(), session });
  await context.documents.show('artifacts/search.txt', renderArtifactSearch(result), 'plaintext');
  void showInfo(
    `DS4: ${String(result.matches.length)} match(es) in ${String(result.searched.length)} artifact(s)${result.truncated ? ' (truncated)' : ''}.`,
  );
}
