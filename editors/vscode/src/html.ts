/**
 * HTML escaping and the page frame for the webviews (the manifest and memory pages).
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

/** A CSP nonce: 16 or more base64 characters; throws naming `who` otherwise. */
export function checkNonce(nonce: string, who: string): void {
  if (!/^[A-Za-z0-9+/=]{16,}$/.test(nonce)) {
    throw new Error(`${who}: the nonce must be 16 or more base64 characters`);
  }
}

/**
 * A whole webview document: a Content-Security-Policy that allows nothing but the style block
 * carrying `nonce` (no script, no image, no font), the `title` (escaped), the `style` rules
 * and the `body` HTML as given. Throws for a bad nonce (`checkNonce`, naming `who`).
 */
export function htmlPage(page: { who: string; nonce: string; title: string; style: string; body: string }): string {
  checkNonce(page.nonce, page.who);
  const nonce = escapeHtml(page.nonce);
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>${escapeHtml(page.title)}</title>
<style nonce="${nonce}">
${page.style}
</style>
</head>
<body>
${page.body}
</body>
</html>
`;
}
