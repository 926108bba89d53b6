// `npm run lint`: typescript-eslint's recommended rules with type information (floating promises
// are errors), the layering of docs/architecture.md as import rules, and no formatting rules:
// prettier owns the layout (`npm run format`), checked by the same script.
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import ts from 'typescript';
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

/**
 * The client package's modules (packages/client: runtime/index.ts and every file it imports, as
 * its `tsc -p` follows them), found afresh on every lint, so a module that joins the client by an
 * import is held to the client's rule at once.
 */
function clientClosure(entry) {
  const seen = new Set();
  const stack = [resolve(import.meta.dirname, entry)];
  while (stack.length > 0) {
    const file = stack.pop();
    if (seen.has(file)) continue;
    seen.add(file);
    for (const { fileName } of ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles) {
      if (fileName.startsWith('.')) stack.push(resolve(dirname(file), fileName.replace(/\.js$/, '.ts')));
    }
  }
  return [...seen].map((file) => relative(import.meta.dirname, file));
}

/**
 * @troupe/client installs without the server: its modules import Node's own modules, each other
 * and the client's dependencies (packages/client/package.json) only: no onnxruntime-node, fastify,
 * gRPC, logger or native addon (shared memory loads the server's build when it is there:
 * runtime/native-addon.ts), and nothing of the head, agents, actors or CLI.
 */
const CLIENT_MANIFEST = JSON.parse(readFileSync(join(import.meta.dirname, 'packages/client/package.json'), 'utf8'));
// Its dependencies, and the devDependencies its bundle inlines (scripts/bundle-client.mjs).
const CLIENT_DEPENDENCIES = [...Object.keys(CLIENT_MANIFEST.dependencies), ...Object.keys(CLIENT_MANIFEST.devDependencies)];
const clientLayer = {
  files: clientClosure('runtime/index.ts'),
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: [
          {
            regex: `^(?!\\.|node:|(${CLIENT_DEPENDENCIES.join('|')})(/|$))`,
            message:
              "the client package (@troupe/client) depends only on what packages/client/package.json lists: this module is in the client's import closure (runtime/index.ts), which installs without the server.",
          },
          {
            regex: '^(\\.\\./)+(actors|head|node-agent|cli|models|bench|test|examples)/|/internal\\.js$',
            message: "the client package's modules cannot import the server's (head, agents, actors, CLI) or runtime/internal.ts.",
          },
        ],
      },
    ],
    'no-restricted-syntax': [
      'error',
      {
        selector: "ImportDeclaration[source.value='zod'] > ImportSpecifier[imported.name='z']",
        message:
          "import * as z from 'zod' in the client's modules: zod's `z` export is all of zod (its 60 locales too), which the client's bundle then carries whole; through the namespace it keeps only what the SDK uses.",
      },
    ],
  },
};

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'packages/*/dist/**',
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
  clientLayer,
  prettier,
);
