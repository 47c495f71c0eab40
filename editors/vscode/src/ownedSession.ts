/**
 * The workspace's server-owned session (docs/protocol.md "`ds4/sessionOpen`"): a session
 * file `ds4-lsp` creates and writes itself, for AI extensions that do not write Pi sessions.
 * It is opened once per workspace, its id kept in `workspaceState`, and reopened by that id
 * after a reload; when the server no longer knows it (its data directory was removed), a new
 * one is opened and remembered instead.
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
   * else (no id, or the server refuses it) created with `OWNED_SESSION_TITLE` in the server's
   * workspace root, and remembered. A failure is not cached: the next call tries again.
   * Rejects with the server's error when even creating fails (e.g. a server without
   * `ds4/sessionOpen`).
   */
  ensure(): Promise<SessionOpenResult> {
    this.opening ??= this.openOrCreate().catch((error: unknown) => {
      this.opening = undefined;
      throw error;
    });
    return this.opening;
  }

  private async openOrCreate(): Promise<SessionOpenResult> {
    const stored = this.stored;
    let result: SessionOpenResult | undefined;
    if (stored !== undefined) {
      try {
        result = await this.open({ sessionId: stored.sessionId });
      } catch {
        // Unknown to this server (data directory moved or removed): open a new one below.
        result = undefined;
      }
    }
    result ??= await this.open({ title: OWNED_SESSION_TITLE });
    if (stored?.sessionId !== result.sessionId || stored.file !== result.file) {
      await this.state.update(OWNED_SESSION_KEY, { sessionId: result.sessionId, file: result.file });
    }
    return result;
  }
}
