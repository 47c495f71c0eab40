/**
 * The "DS4 Manifest" webview: one panel, reused, showing the last manifest rendered by
 * `renderManifestHtml` (no scripts, a fresh CSP nonce per render).
 */

import { randomBytes } from 'node:crypto';

import * as vscode from 'vscode';

import { renderManifestHtml } from './manifestView';
import type { Manifest, PlanResult } from './protocol';

export class ManifestPanel implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private shown: { manifest: Manifest; plan: PlanResult | undefined } | undefined;

  /** Show `manifest` (and the plan it came from, when known), opening the panel if needed. */
  show(manifest: Manifest, plan?: PlanResult): void {
    if (this.panel) {
      this.panel.reveal(undefined, true);
    } else {
      this.panel = vscode.window.createWebviewPanel(
        'ds4.manifest',
        'DS4 Manifest',
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
        { enableScripts: false, enableCommandUris: false, localResourceRoots: [] },
      );
      this.panel.onDidDispose(() => {
        this.panel = undefined;
        this.shown = undefined;
      });
    }
    this.render(manifest, plan);
  }

  /** Re-render in place if the panel is open; never opens it. */
  refresh(manifest: Manifest, plan?: PlanResult): void {
    if (this.panel) {
      this.render(manifest, plan);
    }
  }

  get isOpen(): boolean {
    return this.panel !== undefined;
  }

  /** The id of the manifest the open panel shows; `undefined` when it is closed. */
  get manifestId(): string | undefined {
    return this.panel ? this.shown?.manifest.id : undefined;
  }

  /** The plan of the manifest shown, when known. */
  get plan(): PlanResult | undefined {
    return this.panel ? this.shown?.plan : undefined;
  }

  dispose(): void {
    this.panel?.dispose();
  }

  private render(manifest: Manifest, plan?: PlanResult): void {
    if (!this.panel) {
      return;
    }
    this.shown = { manifest, plan };
    this.panel.title = `DS4 Manifest ${manifest.id}`;
    this.panel.webview.html = renderManifestHtml(manifest, {
      nonce: randomBytes(18).toString('base64'),
      ...(plan && { plan }),
    });
  }
}
