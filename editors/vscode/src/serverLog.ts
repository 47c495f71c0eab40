/**
 * The level of one line the server wrote to stderr. `ds4-lsp` logs
 * `<date> <time> <LEVEL> <logger>: <message>` (ds4_lsp/logs.py); the language client would
 * show every stderr line as an error, so the extension routes each line by this level.
 *
 * Pure module: no `vscode` import.
 */

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';

const LEVELS: Record<string, LogLevel> = {
  CRITICAL: 'error',
  ERROR: 'error',
  WARNING: 'warn',
  INFO: 'info',
  DEBUG: 'debug',
};

/** The line's level; lines of another shape (a traceback, argparse usage) are errors. */
export function stderrLineLevel(line: string): LogLevel {
  const match = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:,\d+)? ([A-Z]+) /.exec(line);
  return (match && LEVELS[match[1] ?? '']) ?? 'error';
}
