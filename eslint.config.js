// `npm run lint`: typescript-eslint's recommended rules with type information (floating promises
// are errors), the layering of docs/architecture.md as import rules, and no formatting rules:
// prettier owns the layout (`npm run format`), checked by the same script.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

/** `actors/`, `head/` and `node-agent/` depend on `runtime/` only, never on each other or on the CLI. */
const layer = (self, others) => ({
  files: [`${self}/**/*.ts`],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: [
          {
            group: others.flatMap((o) => [`../${o}/*`, `../../${o}/*`, `../../../${o}/*`]),
            message: `${self}/ may import only runtime/ and its own files (docs/architecture.md).`,
          },
          {
            group: ['**/runtime/index.js'],
            message:
              "runtime/index.ts is the SDK's public surface; the processes import runtime/internal.js, so the public list grows only on purpose.",
          },
        ],
      },
    ],
  },
});

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      '.venv-clients/**',
      '.venv-peers/**',
      'head/status/client/**',
      'native/**',
      '**/*.js',
      '**/*.mjs',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // A `let` declared ahead of the closures that read it (a socket, a connection) is not a const.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  // node:test's test() and describe() return promises the runner awaits itself.
  // Tests also match terminal colour codes (ANSI escapes) in what the CLI prints.
  { files: ['test/**/*.ts'], rules: { '@typescript-eslint/no-floating-promises': 'off', 'no-control-regex': 'off' } },
  layer('actors', ['head', 'node-agent', 'cli']),
  layer('head', ['actors', 'node-agent', 'cli']),
  layer('node-agent', ['actors', 'head', 'cli']),
  layer('cli', ['actors']),
  prettier,
);
