/**
 * Read-only editor documents for ds4 views (a compaction result, a summary graph, its DOT):
 * a `TextDocumentContentProvider` for the `ds4-view` scheme, whose documents VS Code opens
 * read-only, as source (`show`) or, for Markdown, rendered in the Markdown preview
 * (`preview`). The text lives in memory; showing the same path again replaces it.
 */

import * as vscode from 'vscode';

export const VIEW_SCHEME = 'ds4-view';
/** The built-in Markdown extension's command that renders a document beside the editor. */
export const MARKDOWN_PREVIEW_COMMAND = 'markdown.showPreviewToSide';

export class ReadOnlyDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly texts = new Map<string, string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly registration: vscode.Disposable;

  constructor() {
    this.registration = vscode.workspace.registerTextDocumentContentProvider(VIEW_SCHEME, this);
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? '';
  }

  /**
   * Show `text` as the read-only document `ds4-view:/<path>` beside the active editor. The
   * language comes from the path's extension (`.md`, `.txt`, `.dot`); `language`, when given
   * and known to VS Code, is set on top (an unknown one, e.g. `dot` without a Graphviz
   * extension, is ignored).
   */
  async show(path: string, text: string, language?: string): Promise<vscode.TextDocument> {
    return this.open(this.store(path, text), language);
  }

  /** Open the stored view `uri` beside the active editor, `language` set as `show` says. */
  private async open(uri: vscode.Uri, language?: string): Promise<vscode.TextDocument> {
    let document = await vscode.workspace.openTextDocument(uri);
    if (language !== undefined && document.languageId !== language) {
      try {
        document = await vscode.languages.setTextDocumentLanguage(document, language);
      } catch {
        // No such language installed: keep the one the extension gave.
      }
    }
    await vscode.window.showTextDocument(document, { viewColumn: vscode.ViewColumn.Beside, preview: false });
    return document;
  }

  /**
   * Show Markdown `text` rendered: the read-only document `ds4-view:/<path>` (`path` ends in
   * `.md`) in VS Code's Markdown preview beside the active editor, through the built-in
   * Markdown extension's `markdown.showPreviewToSide` command. Where that command is missing
   * (the built-in extension disabled), the Markdown source is shown instead, as `show` does.
   */
  async preview(path: string, text: string): Promise<void> {
    const uri = this.store(path, text);
    try {
      await vscode.commands.executeCommand(MARKDOWN_PREVIEW_COMMAND, uri);
    } catch {
      await this.open(uri, 'markdown');
    }
  }

  /** Keep `text` as the content of `ds4-view:/<path>`; an open view of it updates. */
  private store(path: string, text: string): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: VIEW_SCHEME, path: `/${path}` });
    const known = this.texts.has(uri.toString());
    this.texts.set(uri.toString(), text);
    if (known) {
      this.changed.fire(uri);
    }
    return uri;
  }

  dispose(): void {
    this.registration.dispose();
    this.changed.dispose();
    this.texts.clear();
  }
}
