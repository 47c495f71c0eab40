/**
 * HTML escaping for the webviews (the manifest page and its sections).
 *
 * Pure module: no `vscode` import.
 */

/** `&`, `<`, `>`, `"` and `'` as entities: safe in text and in quoted attributes. */
export function escapeHtml(value: unknown): string {
  return String(value)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}
