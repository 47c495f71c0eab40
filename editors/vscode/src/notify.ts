/**
 * The extension's notifications: `vscode.window.show*Message` with the message made plain text
 * first (`plainNotice`: no `[label](command:…)` link can form from the server's text). Each
 * resolves to the item the user picked, or undefined.
 */

import * as vscode from 'vscode';
import { plainNotice } from './notices';

/** An information notification with optional buttons. */
export function showInfo<T extends string>(message: string, ...items: T[]): Thenable<T | undefined> {
  return vscode.window.showInformationMessage(plainNotice(message), ...items);
}

/** A warning notification with optional buttons. */
export function showWarning<T extends string>(message: string, ...items: T[]): Thenable<T | undefined> {
  return vscode.window.showWarningMessage(plainNotice(message), ...items);
}

/** An error notification with optional buttons. */
export function showError<T extends string>(message: string, ...items: T[]): Thenable<T | undefined> {
  return vscode.window.showErrorMessage(plainNotice(message), ...items);
}
