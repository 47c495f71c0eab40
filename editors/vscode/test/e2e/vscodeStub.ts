/**
 * A stand-in for the `vscode` module, so the compiled extension can be activated in plain
 * node (there is no VS Code on the CI machine). The parts the extension itself uses are
 * modelled and recorded (commands, the tool, the status bar item, messages, the webview,
 * settings, trust, chat models, read-only documents, the clipboard); everything else vscode-languageclient touches is a "deep" stub: any
 * property is a callable that returns another deep stub, and `dispose` does nothing.
 *
 * It checks the wiring, not VS Code's behaviour: what a command does, what the status bar
 * says, what HTML the webview gets, what the server is started with and told.
 */

import Module from 'node:module';

type Listener<T> = (value: T) => unknown;

export class StubEventEmitter<T> {
  private listeners: Listener<T>[] = [];
  readonly event = (listener: Listener<T>): { dispose(): void } => {
    this.listeners.push(listener);
    return {
      dispose: () => {
        this.listeners = this.listeners.filter((other) => other !== listener);
      },
    };
  };
  fire(value: T): void {
    for (const listener of [...this.listeners]) {
      listener(value);
    }
  }
  dispose(): void {
    this.listeners = [];
  }
}

/** A callable, constructible object whose every property is another such object. */
function deep(name: string): unknown {
  const target = function stub(): unknown {
    return deep(`${name}()`);
  };
  return new Proxy(target, {
    get(_target, property): unknown {
      if (property === 'then') {
        return undefined; // not a thenable
      }
      if (property === Symbol.iterator) {
        return function* empty(): Generator<never> {
          // nothing
        };
      }
      if (property === Symbol.toPrimitive) {
        return () => name;
      }
      if (property === 'dispose') {
        return () => undefined;
      }
      return deep(`${name}.${String(property)}`);
    },
    construct(): object {
      return deep(`new ${name}`) as object;
    },
  });
}

/** `base` with every property it lacks answered by `deep`. */
function withDefaults<T extends object>(name: string, base: T): T {
  return new Proxy(base, {
    get(target, property, receiver): unknown {
      return property in target ? Reflect.get(target, property, receiver) : deep(`${name}.${String(property)}`);
    },
  });
}

export interface QuickPickAnswer {
  label: string;
}

/** A document the extension showed: its uri, language and text at the time. */
export interface ShownDocument {
  uri: string;
  languageId: string;
  text: string;
}

/** A chat model as `vscode.lm.selectChatModels` returns it (the parts the extension uses). */
export interface StubChatModel {
  id: string;
  vendor: string;
  family: string;
  name: string;
  maxInputTokens: number;
  sendRequest(messages: unknown[], options: unknown, token: unknown): Promise<{ text: AsyncIterable<string> }>;
}

interface StubUri {
  scheme: string;
  path: string;
  toString(): string;
}

/** Languages the stub knows (`setTextDocumentLanguage` rejects others, as VS Code does). */
const KNOWN_LANGUAGES = new Set(['markdown', 'plaintext', 'json']);
const LANGUAGE_BY_EXTENSION: Record<string, string> = { md: 'markdown', txt: 'plaintext', json: 'json' };

/** What the stub recorded, and the knobs a test turns. */
export class StubVscode {
  readonly settings = new Map<string, unknown>();
  isTrusted = false;
  readonly commands = new Map<string, (...args: unknown[]) => unknown>();
  readonly tools = new Map<string, unknown>();
  readonly statusTexts: string[] = [];
  statusTooltip = '';
  readonly messages: { kind: 'info' | 'warning' | 'error'; text: string }[] = [];
  readonly outputLines: string[] = [];
  private html: string | undefined;
  webviewOptions: unknown;
  inputBoxAnswer: string | undefined = '';
  /** The options of every input box shown, in order. */
  readonly inputBoxes: unknown[] = [];
  /** The button the next shown message answers with (then reset); default none. */
  nextMessageChoice: string | undefined;
  quickPick: (items: QuickPickAnswer[]) => QuickPickAnswer | undefined = (items) => items[0];
  openDialogAnswer: string | undefined;
  /** `window.activeTextEditor` (a test builds the parts the extension reads). */
  activeEditor: unknown;
  /** The chat models `vscode.lm.selectChatModels` returns (any family). */
  chatModels: StubChatModel[] = [];
  /** The selectors `vscode.lm.selectChatModels` was called with. */
  readonly modelSelectors: unknown[] = [];
  /** Documents shown with `window.showTextDocument`, in order. */
  readonly shownDocuments: ShownDocument[] = [];
  /** Text written to the clipboard, in order. */
  readonly clipboard: string[] = [];
  /**
   * Calls of `commands.executeCommand`, in order: the command, its first argument as text and,
   * when that is a URI with a registered content provider, the document's text.
   */
  readonly executedCommands: { command: string; argument?: string; text?: string }[] = [];
  /** Commands `commands.executeCommand` rejects as not found (e.g. a disabled extension's). */
  readonly missingCommands = new Set<string>();
  private readonly contentProviders = new Map<string, { provideTextDocumentContent(uri: StubUri): string }>();
  readonly configurationChanged = new StubEventEmitter<{ affectsConfiguration(section: string): boolean }>();
  readonly trustGranted = new StubEventEmitter<undefined>();

  /** The HTML the webview was last given. */
  webviewHtml(): string | undefined {
    return this.html;
  }

  clearWebview(): void {
    this.html = undefined;
  }

  /** The `vscode` module object. */
  module(): unknown {
    const record = (kind: 'info' | 'warning' | 'error') => (text: string, ...buttons: unknown[]): Promise<string | undefined> => {
      this.messages.push({ kind, text });
      const choice = this.nextMessageChoice;
      this.nextMessageChoice = undefined;
      return Promise.resolve(choice !== undefined && buttons.includes(choice) ? choice : undefined);
    };
    const output = (level: string) => (line: unknown): void => {
      this.outputLines.push(`${level} ${String(line)}`);
    };
    const outputChannel = withDefaults('outputChannel', {
      name: 'DS4',
      info: output('info'),
      warn: output('warn'),
      error: output('error'),
      debug: output('debug'),
      trace: output('trace'),
      appendLine: output('line'),
      append: output('text'),
      show: () => undefined,
      dispose: () => undefined,
    });
    const statusItem = withDefaults('statusItem', {
      set text(text: string) {
        stub.statusTexts.push(text);
      },
      set tooltip(tooltip: string) {
        stub.statusTooltip = tooltip;
      },
      show: () => undefined,
      dispose: () => undefined,
    });
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the setters above need the instance
    const stub = this;
    const uriFrom = (components: { scheme: string; path: string }): StubUri => ({
      scheme: components.scheme,
      path: components.path,
      toString: () => `${components.scheme}:${components.path}`,
    });
    const documentOf = (uri: StubUri, languageId?: string) => {
      const extension = uri.path.split('.').pop() ?? '';
      return {
        uri,
        languageId: languageId ?? LANGUAGE_BY_EXTENSION[extension] ?? 'plaintext',
        getText: () => this.contentProviders.get(uri.scheme)?.provideTextDocumentContent(uri) ?? '',
      };
    };
    return withDefaults('vscode', {
      version: '1.99.0',
      env: withDefaults('env', {
        appName: 'Visual Studio Code',
        language: 'en',
        machineId: 'test',
        sessionId: 'test',
        remoteName: undefined, // a local window
        clipboard: {
          writeText: (text: string) => {
            this.clipboard.push(text);
            return Promise.resolve();
          },
        },
      }),
      Uri: withDefaults('Uri', { from: uriFrom }),
      LanguageModelChatMessage: { User: (content: string) => ({ role: 1, content }) },
      EventEmitter: StubEventEmitter,
      Disposable: class {
        static from(): { dispose(): void } {
          return { dispose: () => undefined };
        }
        constructor(private readonly onDispose?: () => void) {}
        dispose(): void {
          this.onDispose?.();
        }
      },
      StatusBarAlignment: { Left: 1, Right: 2 },
      ViewColumn: { Active: -1, Beside: -2 },
      ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
      ThemeColor: class {
        constructor(readonly id: string) {}
      },
      LanguageModelToolResult: class {
        constructor(readonly content: unknown[]) {}
      },
      LanguageModelTextPart: class {
        constructor(readonly value: string) {}
      },
      window: withDefaults('window', {
        get activeTextEditor() {
          return stub.activeEditor;
        },
        createOutputChannel: () => outputChannel,
        createStatusBarItem: () => statusItem,
        showInformationMessage: record('info'),
        showWarningMessage: record('warning'),
        showErrorMessage: record('error'),
        withProgress: (_options: unknown, task: (progress: { report(value: unknown): void }) => unknown) =>
          task({ report: () => undefined }),
        showQuickPick: (items: QuickPickAnswer[]) => Promise.resolve(this.quickPick(items)),
        showInputBox: (options: unknown) => {
          this.inputBoxes.push(options);
          return Promise.resolve(this.inputBoxAnswer);
        },
        showOpenDialog: () =>
          Promise.resolve(this.openDialogAnswer === undefined ? undefined : [{ fsPath: this.openDialogAnswer }]),
        showTextDocument: (document: ReturnType<typeof documentOf>) => {
          this.shownDocuments.push({ uri: document.uri.toString(), languageId: document.languageId, text: document.getText() });
          return Promise.resolve({ document });
        },
        createWebviewPanel: (_type: string, _title: string, _show: unknown, options: unknown) => {
          this.webviewOptions = options;
          return {
            webview: withDefaults('webview', {
              set html(html: string) {
                stub.html = html;
              },
            }),
            title: '',
            reveal: () => undefined,
            onDidDispose: () => ({ dispose: () => undefined }),
            dispose: () => undefined,
          };
        },
      }),
      workspace: withDefaults('workspace', {
        get isTrusted() {
          return stub.isTrusted;
        },
        workspaceFolders: undefined,
        textDocuments: [],
        notebookDocuments: [],
        getConfiguration: () => ({
          get: (key: string) => this.settings.get(key),
          has: (key: string) => this.settings.has(key),
          inspect: () => undefined,
          update: () => Promise.resolve(),
        }),
        onDidChangeConfiguration: this.configurationChanged.event,
        onDidGrantWorkspaceTrust: this.trustGranted.event,
        registerTextDocumentContentProvider: (scheme: string, provider: { provideTextDocumentContent(uri: StubUri): string }) => {
          this.contentProviders.set(scheme, provider);
          return { dispose: () => this.contentProviders.delete(scheme) };
        },
        openTextDocument: (uri: StubUri) => Promise.resolve(documentOf(uri)),
      }),
      languages: withDefaults('languages', {
        setTextDocumentLanguage: (document: ReturnType<typeof documentOf>, languageId: string) =>
          KNOWN_LANGUAGES.has(languageId)
            ? Promise.resolve(documentOf(document.uri, languageId))
            : Promise.reject(new Error(`Unknown language id: ${languageId}`)),
      }),
      commands: withDefaults('commands', {
        registerCommand: (id: string, run: (...args: unknown[]) => unknown) => {
          this.commands.set(id, run);
          return { dispose: () => this.commands.delete(id) };
        },
        executeCommand: (command: string, ...args: unknown[]) => {
          if (this.missingCommands.has(command)) {
            return Promise.reject(new Error(`command '${command}' not found`));
          }
          const first = args[0] as Partial<StubUri> | undefined;
          const provider = typeof first?.scheme === 'string' ? this.contentProviders.get(first.scheme) : undefined;
          this.executedCommands.push({
            command,
            ...(first !== undefined && { argument: String(first) }),
            ...(provider && { text: provider.provideTextDocumentContent(first as StubUri) }),
          });
          return Promise.resolve(undefined);
        },
      }),
      lm: {
        registerTool: (name: string, tool: unknown) => {
          this.tools.set(name, tool);
          return { dispose: () => this.tools.delete(name) };
        },
        selectChatModels: (selector: unknown) => {
          this.modelSelectors.push(selector);
          return Promise.resolve(this.chatModels);
        },
      },
    });
  }

  /** Make `require('vscode')` return this stub from now on. */
  install(): void {
    const vscode = this.module();
    const loader = Module as unknown as { _load(request: string, ...rest: unknown[]): unknown };
    const load = loader._load.bind(loader);
    loader._load = (request: string, ...rest: unknown[]): unknown => (request === 'vscode' ? vscode : load(request, ...rest));
  }
}
