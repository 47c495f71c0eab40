/**
 * The workspace's server-owned session (docs/protocol.md "`ds4/sessionOpen`"): a session
 * file `ds4-lsp` creates and writes itself, for AI extensions that do not write Pi sessions.
 * It is opened once per workspace, its id kept in `workspaceState`, and reopened by that id
 * after a reload. When reopening fails (a server restarting, a timeout, a data directory moved
 * away), the stored id is kept and the error surfaced (`OwnedSessionReopenError`): a new
 * session is opened only when none is stored, or when the user asks for one (`startNew`), so
 * the history, pins and memory of the old one are never left behind silently.
 *
 * Pure module: no `vscode` import (the state is any `Memento`-like store).
 */

import type { SessionOpenParams, SessionOpenResult } from './protocol';

/** workspaceState key of the owned session: `{sessionId, file}`. */
export const OWNED_SESSION_KEY = 'ds4.ownedSession';

/** The title of the sessions the extension opens (Pi's `session_info` name). */
export const OWNED_SESSION_TITLE = 'DS4 session (VS Code)';

/** What `vscode.Memento` offers that this module needs. */
export interface StateStore {
  get(key: string): unknown;
  update(key: string, value: unknown): PromiseLike<void>;
}

export interface StoredOwnedSession {
  sessionId: string;
  file: string;
}

/** `value` when it is a stored owned session (both fields non-empty strings). */
function asStored(value: unknown): StoredOwnedSession | undefined {
  if (typeof value !== 'object' || value === null) {
    return undefined;
  }
  const { sessionId, file } = value as Record<string, unknown>;
  return typeof sessionId === 'string' && sessionId !== '' && typeof file === 'string' && file !== ''
    ? { sessionId, file }
    : undefined;
}

/**
 * Reopening the stored owned session failed; the stored id is kept. The server's
 * error (`failure`); `stored` the session that could not be reopened.
 */
export class OwnedSessionReopenError extends Error {
  constructor(
    readonly stored: StoredOwnedSession,
    readonly failure: unknown,
  ) {
    const why = failure instanceof Error ? failure.message : String(failure);
    super(
      `DS4: could not reopen the workspace's DS4-owned session ${stored.sessionId} (${stored.file}): ${why}. ` +
        'It is kept and tried again next time; start a new session only if that one is gone for good.',
    );
    this.name = 'OwnedSessionReopenError';
  }
}

export class OwnedSession {
  private opening: Promise<SessionOpenResult> | undefined;

  /**
   * `open` sends `ds4/sessionOpen` (the extension: through the running server). Nothing is
   * asked until `ensure()`.
   */
  constructor(
    private readonly state: StateStore,
    private readonly open: (params: SessionOpenParams) => Promise<SessionOpenResult>,
  ) {}

  /** The session remembered for this workspace, without asking the server (may be stale). */
  get stored(): StoredOwnedSession | undefined {
    return asStored(this.state.get(OWNED_SESSION_KEY));
  }

  /**
   * The workspace's owned session, opened at most once per window: reopened by the stored id,
   * else (nothing stored) created with `OWNED_SESSION_TITLE` in the server's workspace root,
   * and remembered. A failure is not cached: the next call tries again. Rejects with
   * `OwnedSessionReopenError` when the stored session cannot be reopened (the stored id is
   * kept), and with the server's error when creating fails (e.g. a server without
   * `ds4/sessionOpen`).
   */
  ensure(): Promise<SessionOpenResult> {
    this.opening ??= this.openOrCreate().catch((error: unknown) => {
      this.opening = undefined;
      throw error;
    });
    return this.opening;
  }

  /**
   * Create a new owned session and remember it in place of the stored one (whose file stays
   * where it is): only on the user's request, after `OwnedSessionReopenError`.
   */
  startNew(): Promise<SessionOpenResult> {
    this.opening = this.create().catch((error: unknown) => {
      this.opening = undefined;
      throw error;
    });
    return this.opening;
  }

  private async openOrCreate(): Promise<SessionOpenResult> {
    const stored = this.stored;
    if (stored === undefined) {
      return this.create();
    }
    let result: SessionOpenResult;
    try {
      result = await this.open({ sessionId: stored.sessionId });
    } catch (error: unknown) {
      throw new OwnedSessionReopenError(stored, error);
    }
    if (stored.file !== result.file) {
      await this.remember(result);
    }
    return result;
  }

  private async create(): Promise<SessionOpenResult> {
    const result = await this.open({ title: OWNED_SESSION_TITLE });
    await this.remember(result);
    return result;
  }

  private remember(result: SessionOpenResult): PromiseLike<void> {
    return this.state.update(OWNED_SESSION_KEY, { sessionId: result.sessionId, file: result.file });
  }
}

/**
 * `owned.ensure()` for a user-facing command: when the stored session cannot be reopened,
 * `ask(message)` shows the error and answers whether to start a new session; only a yes
 * replaces the stored id (`startNew`). A no rethrows the error marked `reported: true` (the
 * command's error report skips it: it was shown). Other errors are rethrown as they are.
 */
export async function ensureOrAsk(
  owned: OwnedSession,
  ask: (message: string) => PromiseLike<boolean>,
): Promise<SessionOpenResult> {
  try {
    return await owned.ensure();
  } catch (error: unknown) {
    if (!(error instanceof OwnedSessionReopenError)) {
      throw error;
    }
    if (!(await ask(error.message))) {
      throw Object.assign(error, { reported: true });
    }
    return owned.startNew();
  }
}
