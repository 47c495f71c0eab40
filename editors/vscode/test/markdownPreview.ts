/**
 * Markdown rendered as VS Code's Markdown preview renders it, for tests: markdown-it with raw
 * HTML on, bare URLs linked (`markdown.preview.linkify`, on by default) and fuzzy links
 * (`www.host` without a scheme) off, as the built-in markdown-language-features extension
 * configures it. Plus the HTML elements and attributes a rendering holds, to assert that text
 * from a model or the server became no HTML, image or link.
 */

import { createRequire } from 'node:module';

/** The part of markdown-it's API used here (the package ships no types). */
interface MarkdownIt {
  render(source: string): string;
  linkify: { set(options: { fuzzyLink: boolean }): unknown };
}

const load = createRequire(__filename);
const markdownIt = load('markdown-it') as (options: { html: boolean; linkify: boolean }) => MarkdownIt;
const preview = markdownIt({ html: true, linkify: true });
preview.linkify.set({ fuzzyLink: false });

/** `source` as the preview's HTML. */
export function renderPreview(source: string): string {
  return preview.render(source);
}

/** Every element name in `html`, once each (e.g. `['h1', 'p', 'table', ...]`). */
export function elementNames(html: string): string[] {
  return [...new Set([...html.matchAll(/<([a-zA-Z][\w-]*)/g)].map((match) => (match[1] ?? '').toLowerCase()))];
}

/** Every attribute in `html`'s tags, as `name="value"` (e.g. `class="language-json"`). */
export function attributes(html: string): string[] {
  return [...html.matchAll(/<[a-zA-Z][\w-]*((?:\s+[^\s>]+)*)\s*\/?>/g)].flatMap((match) => (match[1] ?? '').trim().split(/\s+/).filter(Boolean));
}

/** The text of `html`: tags dropped, markdown-it's entities decoded. */
export function textOf(html: string): string {
  return html
    .replace(/<[^>]*>/g, '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, '&');
}
