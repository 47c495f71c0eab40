/**
 * Notifications that show the server's text as plain text. VS Code turns `[label](target)` in a
 * notification message into a link (`https:`, `file:` and `command:` targets), and a click on a
 * `command:` link runs that command with its arguments. Text in a notice may come from a
 * session, a model or a file name, so every DS4 notification goes through `plainNotice`.
 *
 * Pure module: no `vscode` import (the calls live in `notify.ts`).
 */

/** `message` with every `](` written as `] (`, so no `[label](target)` link can form. */
export function plainNotice(message: string): string {
  return message.replace(/\]\s*\(/g, '] (');
}
