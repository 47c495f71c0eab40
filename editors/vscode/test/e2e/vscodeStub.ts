/**
 * A stand-in for the `vscode` module, so the compiled extension can be activated in plain
 * node (there is no VS Code on the CI machine). The parts the extension itself uses are
 * modelled and recorded (commands, the tool, the status bar item, messages, the webview,
 * settings, trust); everything else vscode-languageclient touches is a "deep" stub: any
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
  quickPick: (items: QuickPickAnswer[]) => QuickPickAnswer | undefined = (items) => items[0];
  openDialogAnswer: string | undefined;
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
    const record = (kind: 'info' | 'warning' | 'error') => (text: string): Promise<undefined> => {
      this.messages.push({ kind, text });
      return Promise.resolve(undefined);
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
    return withDefaults('vscode', {
      version: '1.99.0',
      env: withDefaults('env', { appName: 'Visual Studio Code', language: 'en', machineId: 'test', sessionId: 'test' }),
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
        createOutputChannel: () => outputChannel,
        createStatusBarItem: () => statusItem,
        showInformationMessage: record('info'),
        showWarningMessage: record('warning'),
        showErrorMessage: record('error'),
        withProgress: (_options: unknown, task: (progress: { report(value: unknown): void }) => unknown) =>
          task({ report: () => undefined }),
        showQuickPick: (items: QuickPickAnswer[]) => Promise.resolve(this.quickPick(items)),
        showInputBox: () => Promise.resolve(this.inputBoxAnswer),
        showOpenDialog: () =>
          Promise.resolve(this.openDialogAnswer === undefined ? undefined : [{ fsPath: this.openDialogAnswer }]),
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
      }),
      commands: withDefaults('commands', {
        registerCommand: (id: string, run: (...args: unknown[]) => unknown) => {
          this.commands.set(id, run);
          return { dispose: () => this.commands.delete(id) };
        },
        executeCommand: () => Promise.resolve(undefined),
      }),
      lm: {
        registerTool: (name: string, tool: unknown) => {
          this.tools.set(name, tool);
          return { dispose: () => this.tools.delete(name) };
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
