// `npm run build`'s step for the client package: from the client's modules as tsc compiled them
// (dist/client-package, packages/client/tsconfig.json), the two files @troupe/client publishes.
//
// - packages/client/dist/index.js: one ES module (esbuild). What the client's dependencies list
//   (packages/client/package.json `dependencies`: ws, which it imports only when it connects)
//   stays an import; what its devDependencies list (zod, msgpackr, nanoid) is inlined, only the
//   parts the SDK reaches, so an application installs none of them (zod's package alone is 6 MB
//   of sources, builds and types; msgpackr's 2 MB). Zod schemas at the top of a module are built
//   when first used, not at import (scripts/deferred-schema.js): building the SDK's ~1,100
//   schemas was most of the time an import took, and loading separate modules most of the rest.
// - packages/client/dist/index.d.ts: one declaration file (dts-bundle-generator), in which every
//   type the SDK derives from a zod schema (`z.infer<typeof …>`) is written out in full, so that
//   it names nothing outside the package but Node's own types.
//
// Skipped when both are newer than everything they are made from.
import { readFile, readdir, stat, writeFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import ts from 'typescript';
import { generateDtsBundle } from 'dts-bundle-generator';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const FROM = join(ROOT, 'dist', 'client-package');
const CLIENT = join(ROOT, 'packages', 'client');
const OUT_JS = join(CLIENT, 'dist', 'index.js');
const OUT_DTS = join(CLIENT, 'dist', 'index.d.ts');
const DEFERRED = fileURLToPath(new URL('./deferred-schema.js', import.meta.url));
const manifest = JSON.parse(await readFile(join(CLIENT, 'package.json'), 'utf8'));

async function files(dir) {
  const out = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await files(path)));
    else out.push(path);
  }
  return out;
}

async function newest(paths) {
  let latest = 0;
  for (const path of paths) latest = Math.max(latest, (await stat(path)).mtimeMs);
  return latest;
}

async function upToDate() {
  try {
    const made = Math.min((await stat(OUT_JS)).mtimeMs, (await stat(OUT_DTS)).mtimeMs);
    // npm rewrites node_modules/.package-lock.json on every install: a new zod (or esbuild) rebuilds.
    const installed = join(ROOT, 'node_modules', '.package-lock.json');
    const inputs = [...(await files(FROM)), fileURLToPath(import.meta.url), DEFERRED, join(CLIENT, 'package.json'), installed];
    return made > (await newest(inputs));
  } catch {
    return false;
  }
}

/** The chain's first name: `z` of `z.object(…).strict()`, `Base` of `Base.extend(…)`. */
function rootName(node) {
  for (;;) {
    if (ts.isIdentifier(node)) return node.text;
    if (ts.isCallExpression(node) || ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node)) node = node.expression;
    else if (ts.isParenthesizedExpression(node) || ts.isNonNullExpression(node)) node = node.expression;
    else return undefined;
  }
}

/** The names this module binds to zod's namespace (`import * as z from 'zod'`). */
function zodNamespaces(source) {
  const names = new Set();
  for (const statement of source.statements) {
    if (!ts.isImportDeclaration(statement) || statement.moduleSpecifier.text !== 'zod') continue;
    const bindings = statement.importClause?.namedBindings;
    if (bindings && ts.isNamespaceImport(bindings)) names.add(bindings.name.text);
  }
  return names;
}

/**
 * The module's text with each top-level `const X = z.…(…)` (or a chain on a schema built so, such
 * as `Base.extend(…)`, or such a chain as a property of a top-level object literal) built on first
 * use, and marked pure, so that the bundle leaves out those the SDK never reaches. Only a call
 * chain is deferred: what it returns is a schema, and deferred-schema.js checks so when it builds one.
 */
function deferSchemas(path, text) {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS);
  const exported = (statement) => statement.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
  const schemas = zodNamespaces(source);
  if (schemas.size === 0) return text;
  const edits = [];
  const chain = (node) => node && ts.isCallExpression(node) && schemas.has(rootName(node));
  const defer = (node) => edits.push({ start: node.getStart(source), end: node.getEnd() });
  for (const statement of source.statements) {
    if (!ts.isVariableStatement(statement) || !(statement.declarationList.flags & ts.NodeFlags.Const)) continue;
    for (const { name, initializer } of statement.declarationList.declarations) {
      if (!ts.isIdentifier(name) || !initializer) continue;
      if (chain(initializer)) {
        schemas.add(name.text);
        defer(initializer);
        deferred.push({ path, name: name.text, exported: exported(statement) });
      } else if (ts.isObjectLiteralExpression(initializer)) {
        for (const property of initializer.properties)
          if (ts.isPropertyAssignment(property) && chain(property.initializer)) defer(property.initializer);
      }
    }
  }
  if (edits.length === 0) return text;
  let out = text;
  for (const { start, end } of edits.reverse()) {
    out = `${out.slice(0, start)}/* @__PURE__ */ deferredSchema(() => ${out.slice(start, end)})${out.slice(end)}`;
  }
  return `import { deferredSchema } from ${JSON.stringify(DEFERRED)};\n${out}`;
}

/** Every top-level const deferSchemas deferred: its module, name, and whether the module exports it. */
const deferred = [];

/**
 * Builds (eagerly: the modules as tsc compiled them) every deferred schema a module exports (88
 * of 96 today), and fails the build if one is not a zod schema, which its stand-in would find
 * only when first used (as it does for the few a module keeps to itself).
 */
async function checkDeferred() {
  const problems = [];
  for (const { path, name, exported } of deferred) {
    if (!exported) continue;
    const value = (await import(pathToFileURL(path).href))[name];
    if (value === null || typeof value !== 'object' || !('_zod' in value)) problems.push(`${relative(ROOT, path)}: ${name}`);
  }
  if (problems.length > 0) throw new Error(`deferred as zod schemas, but not schemas:\n${problems.join('\n')}`);
}

const deferring = {
  name: 'defer-zod-schemas',
  setup(build) {
    build.onLoad({ filter: /\.js$/ }, async (args) => {
      if (relative(FROM, args.path).startsWith('..')) return undefined;
      return { contents: deferSchemas(args.path, await readFile(args.path, 'utf8')), loader: 'js' };
    });
  },
};

/**
 * msgpackr's entry for Node (node-index.js) loads its optional native decoder, msgpackr-extract,
 * when installed; its plain entry (index.js) is the same encoder and decoder without that step.
 * The bundle takes the plain one: the client never requires the addon. Inlined, it is the client's
 * own copy, whose extension registry (msgpackr's is global, last registration wins) holds the
 * client's extensions only: a process that loads both the server's build of runtime/ and the
 * client (an actor whose module imports 'troupe') encodes and decodes each build's values with that
 * build's extensions, not whichever registered last.
 */
const msgpackrWithoutAddon = {
  name: 'msgpackr-without-addon',
  setup(build) {
    build.onResolve({ filter: /^msgpackr$/ }, () => ({ path: join(ROOT, 'node_modules', 'msgpackr', 'index.js') }));
  },
};

/** The licence notices of the packages the bundle inlines, for its last comment. */
async function notices() {
  const parts = [];
  for (const name of Object.keys(manifest.devDependencies ?? {}).sort()) {
    const dir = join(ROOT, 'node_modules', name);
    const { version, license } = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8'));
    const file = (await readdir(dir)).find((f) => /^licen[cs]e/i.test(f));
    const text = file ? await readFile(join(dir, file), 'utf8') : '';
    parts.push(`${name}@${version} (${license}), inlined in this file:\n\n${text.trim()}`);
  }
  return `/*\n${parts.join('\n\n---\n\n').replaceAll('*/', '* /')}\n*/`;
}

async function bundle() {
  const result = await build({
    entryPoints: [join(FROM, 'index.js')],
    outfile: OUT_JS,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20.10',
    external: Object.keys(manifest.dependencies ?? {}),
    plugins: [msgpackrWithoutAddon, deferring],
    // Classes and functions keep their names (esbuild renames one that refers to itself, or that
    // another module's name collides with): TroupeError prints as TroupeError, not _TroupeError.
    keepNames: true,
    legalComments: 'none',
    footer: { js: await notices() },
    logLevel: 'warning',
    metafile: true,
    absWorkingDir: ROOT,
  });
  // Nothing of the server's may have come in by a path the lint rule does not see.
  const inputs = Object.keys(result.metafile.inputs);
  const allowed = [`${relative(ROOT, FROM)}/`, ...Object.keys(manifest.devDependencies ?? {}).map((name) => `node_modules/${name}/`)];
  const foreign = inputs.filter((input) => input !== relative(ROOT, DEFERRED) && !allowed.some((prefix) => input.startsWith(prefix)));
  if (foreign.length > 0)
    throw new Error(`the client bundle took in files outside the client's build and its inlined dependencies: ${foreign.join(', ')}`);
}

/** The TypeScript options a declaration file is checked and expanded under. */
const CHECK = {
  strict: true,
  noEmit: true,
  skipLibCheck: false,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  types: ['node'],
  typeRoots: [join(ROOT, 'node_modules', '@types')],
};

function diagnostics(program) {
  return ts
    .getPreEmitDiagnostics(program)
    .map(
      (d) =>
        `${d.file ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: ` : ''}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`,
    );
}

/**
 * The rolled-up declarations with each type alias that names zod written out as the type it is,
 * and the schema declarations that only those aliases named left out.
 */
async function expand(text) {
  // Beside the client's build, not in it (which would make the build look newer than the bundle).
  const path = join(ROOT, 'dist', 'client-package.rolled.d.ts');
  await writeFile(path, `import type * as z from 'zod';\n${text}`);
  const program = ts.createProgram([path], CHECK);
  const problems = diagnostics(program);
  if (problems.length > 0) throw new Error(`the rolled-up declarations do not check:\n${problems.join('\n')}`);
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(path);
  const namesZod = (node) => /\bz\./.test(node.getText(source));
  const flags = ts.NodeBuilderFlags.NoTruncation | ts.NodeBuilderFlags.InTypeAlias | ts.NodeBuilderFlags.MultilineObjectLiterals;
  const printer = ts.createPrinter();
  const edits = [];
  for (const statement of source.statements) {
    if (ts.isTypeAliasDeclaration(statement) && namesZod(statement.type)) {
      const node = checker.typeToTypeNode(checker.getTypeAtLocation(statement.name), statement, flags);
      const written = node ? printer.printNode(ts.EmitHint.Unspecified, node, source) : 'unknown';
      if (/\bz\.|\.\.\.|\bany\b/.test(written))
        throw new Error(`type ${statement.name.text} does not write out without zod: ${written.slice(0, 200)}`);
      edits.push({ start: statement.type.getStart(source), end: statement.type.getEnd(), text: written });
    }
  }
  let out = source.text;
  for (const { start, end, text: written } of edits.reverse()) out = out.slice(0, start) + written + out.slice(end);
  return prune(out.replace(/^import type \* as z from 'zod';\n/, ''));
}

/** Leaves out, until none is left, declarations that name zod and that nothing else names. */
function prune(text) {
  for (;;) {
    const source = ts.createSourceFile('index.d.ts', text, ts.ScriptTarget.Latest, true);
    const unused = source.statements.find((statement) => {
      if (!/\bz\./.test(statement.getText(source))) return false;
      const names = ts.isVariableStatement(statement)
        ? statement.declarationList.declarations.map((d) => d.name.getText(source))
        : statement.name
          ? [statement.name.text]
          : [];
      const rest = text.slice(0, statement.getFullStart()) + text.slice(statement.getEnd());
      return names.length > 0 && names.every((name) => !new RegExp(`\\b${name}\\b`).test(rest));
    });
    if (!unused) return text;
    text = text.slice(0, unused.getFullStart()) + text.slice(unused.getEnd());
  }
}

/** The declarations, checked where no zod is installed: they must stand on their own. */
async function checkAlone(text) {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-client-dts-'));
  try {
    await writeFile(join(dir, 'index.d.ts'), text);
    const problems = diagnostics(ts.createProgram([join(dir, 'index.d.ts')], CHECK));
    if (problems.length > 0) throw new Error(`packages/client/dist/index.d.ts does not check on its own:\n${problems.join('\n')}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function declarations() {
  const [rolled] = generateDtsBundle([{ filePath: join(FROM, 'index.d.ts'), output: { noBanner: true, exportReferencedTypes: false } }], {
    preferredConfigPath: join(CLIENT, 'tsconfig.json'),
  });
  const text = await expand(rolled);
  const namesZod = (line) => /from 'zod'|import\('zod'\)|\bz\./.test(line);
  if (text.split('\n').some(namesZod))
    throw new Error(`packages/client/dist/index.d.ts still names zod:\n${text.split('\n').filter(namesZod).join('\n')}`);
  await checkAlone(text);
  await writeFile(OUT_DTS, text);
}

if (!(await upToDate())) {
  await rm(join(CLIENT, 'dist'), { recursive: true, force: true });
  await mkdir(dirname(OUT_JS), { recursive: true });
  await bundle();
  await checkDeferred();
  await declarations();
}
