// ESLint flat config: typescript-eslint's strict, type-checked rules over src/ and test/.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['out/', 'node_modules/', '*.vsix'] },
  js.configs.recommended,
  tseslint.configs.strictTypeChecked,
  tseslint.configs.stylisticTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-restricted-imports': 'off',
      eqeqeq: 'error',
    },
  },
  {
    // Pure modules must run in plain node (unit tests): no `vscode` import.
    files: [
      'src/protocol.ts',
      'src/settings.ts',
      'src/requests.ts',
      'src/status.ts',
      'src/manifestView.ts',
      'src/historyTool.ts',
      'src/serverLog.ts',
      'src/sessionFiles.ts',
      'src/summarize.ts',
      'src/compactionView.ts',
      'src/privacyView.ts',
      'src/usageView.ts',
      'src/html.ts',
      'src/memoryView.ts',
      'src/ownedSession.ts',
    ],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: [
            { name: 'vscode', message: 'Pure module: keep vscode out so it runs in plain node.', allowTypeImports: false },
            { name: 'vscode-languageclient', message: 'Pure module: vscode-languageclient loads vscode.' },
            { name: 'vscode-languageclient/node', message: 'Pure module: vscode-languageclient loads vscode.' },
          ],
        },
      ],
    },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      // node:test's describe/it return promises the runner itself awaits.
      '@typescript-eslint/no-floating-promises': [
        'error',
        { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['describe', 'it', 'test'] }] },
      ],
    },
  },
  {
    files: ['eslint.config.mjs'],
    extends: [tseslint.configs.disableTypeChecked],
  },
  {
    // The real-VS-Code test: plain ES modules run by Node 24, outside tsconfig (its
    // playwright-core lives in the test's own cache dir, not in node_modules).
    files: ['test/e2e-real/**/*.mjs'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        fetch: 'readonly',
        document: 'readonly',
      },
    },
  },
);
