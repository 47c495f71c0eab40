/**
 * Where Pi keeps the sessions of a working directory (docs/reference.md §P1), so the
 * "DS4: Plan Request" command can offer the workspace's recent sessions.
 *
 * Pure module: no `vscode` import.
 */

import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Pi's session directory for `cwd`: `$PI_CODING_AGENT_SESSION_DIR` when set, else
 * `<agent dir>/sessions/--<encoded cwd>--`, the agent dir being `$PI_CODING_AGENT_DIR` or
 * `~/.pi/agent`. The cwd is encoded by dropping one leading `/` or `\` and replacing every
 * `/`, `\` and `:` with `-` (`/Users/me/proj` -> `--Users-me-proj--`).
 */
export function piSessionDir(cwd: string, env: Record<string, string | undefined>, homeDir: string): string {
  const sessionDir = nonEmpty(env.PI_CODING_AGENT_SESSION_DIR);
  if (sessionDir !== undefined) {
    return sessionDir;
  }
  const agentDir = nonEmpty(env.PI_CODING_AGENT_DIR) ?? join(homeDir, '.pi', 'agent');
  const encoded = cwd.replace(/^[/\\]/, '').replace(/[/\\:]/g, '-');
  return join(agentDir, 'sessions', `--${encoded}--`);
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === '' ? undefined : value;
}

export interface SessionFile {
  path: string;
  /** Modification time, milliseconds since the epoch. */
  mtimeMs: number;
}

/** The `.jsonl` files in `dir`, most recently modified first, at most `limit`; none if unreadable. */
export function recentSessionFiles(dir: string, limit = 20): SessionFile[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const files: SessionFile[] = [];
  for (const name of names) {
    if (!name.endsWith('.jsonl')) {
      continue;
    }
    const path = join(dir, name);
    try {
      const stat = statSync(path);
      if (stat.isFile()) {
        files.push({ path, mtimeMs: stat.mtimeMs });
      }
    } catch {
      // Removed between listing and stat: skip it.
    }
  }
  return files.sort((a, b) => b.mtimeMs - a.mtimeMs || a.path.localeCompare(b.path)).slice(0, limit);
}
