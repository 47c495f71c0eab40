/**
 * The "DS4 Memory" webview: one panel, reused, showing the last `ds4/memory` answer rendered
 * by `renderMemoryHtml`. No scripts; the only command its links may run is the memory action
 * (`enableCommandUris`), and a fresh CSP nonce is used per render.
 */

import { randomBytes } from 'node:crypto';

import * as vscode from 'vscode';

import { MEMORY_ACTION_COMMAND, renderMemoryHtml } from './memoryView';
import type { MemoryItem, MemoryResult, PinItem, SessionRef } from './protocol';

/** What the panel shows: the answer and the session it was asked for. */
export interface MemoryShown {
  result: MemoryResult;
  session: SessionRef;
  owned: boolean;
}

export class MemoryPanel implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private current: MemoryShown | undefined;

  /** Show `shown`, opening the panel beside the editor if needed. */
  show(shown: MemoryShown): void {
    if (this.panel) {
      this.panel.reveal(undefined, true);
    } else {
      this.panel = vscode.window.createWebviewPanel(
        'ds4.memory',
        'DS4 Memory',
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
        { enableScripts: false, enableCommandUris: [MEMORY_ACTION_COMMAND], localResourceRoots: [] },
      );
      this.panel.onDidDispose(() => {
        this.panel = undefined;
        this.current = undefined;
      });
    }
    this.current = shown;
    this.panel.webview.html = renderMemoryHtml(shown.result, {
      nonce: randomBytes(18).toString('base64'),
      sessionFile: shown.session.file,
      owned: shown.owned,
    });
  }

  /** What the open panel shows; `undefined` when it is closed. */
  get shown(): MemoryShown | undefined {
    return this.panel ? this.current : undefined;
  }

  /** The item `id` of the list shown, if any. */
  item(kind: 'memory', id: string): MemoryItem | undefined;
  item(kind: 'pin', id: string): PinItem | undefined;
  item(kind: 'memory' | 'pin', id: string): MemoryItem | PinItem | undefined {
    const result = this.current?.result;
    const items: (MemoryItem | PinItem)[] = kind === 'memory' ? (result?.memory ?? []) : (result?.pins ?? []);
    return items.find((item) => item.id === id);
  }

  dispose(): void {
    this.panel?.dispose();
  }
}
