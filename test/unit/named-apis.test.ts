import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { COMMANDS } from '../../cli/commands.js';
import { ActorHandle, Cluster } from '../../runtime/index.js';

/**
 * Every SDK method, CLI command and flag that a message in shipped code names (an error's hint,
 * a help line, a page's note) must be one that works: a hint that names `cluster.actor('x').call`
 * when the call is `cluster.actorHandle('x').call` sends the reader to `h.call is not a function`.
 * The names are read from the sources, so a new message is checked the day it is written.
 */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const SHIPPED = ['actors', 'cli', 'head', 'node-agent', 'runtime', 'models'];

/** Flags of other programs that shipped code passes on (nvidia-smi's queries, Node's profiler). */
const OTHER_PROGRAMS_FLAGS = new Set(['--query-gpu', '--query-compute-apps', '--format', '--cpu-prof', '--cpu-prof-dir']);
/** Taken before any command (cli/log-format.ts), so no command lists it. */
const GLOBAL_FLAGS = ['--help', '--log-format'];
/** What a method's first argument must look like where it is not a name (a string). */
const FIRST_ARGUMENT: Record<string, RegExp> = { actor: /^(spec|\{)/ };
/** `troupe actor: …` labels an actor process's stderr lines: a process, not a command. */
const PROCESS_LABELS = new Set(['actor', 'class', 'fn']);

interface Named {
  what: string;
  where: string;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'static' ? [] : sources(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The lines of code (not comments: a comment names what it likes) with where each is. */
function codeLines(): Array<{ line: string; where: string }> {
  return SHIPPED.flatMap((top) => sources(join(ROOT, top))).flatMap((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .map((line, i) => ({ line, where: `${relative(ROOT, file)}:${i + 1}` }))
      .filter(({ line }) => !/^\s*(\/\/|\/\*|\*)/.test(line)),
  );
}

function named(pattern: RegExp): Array<Named & { groups: string[] }> {
  return codeLines().flatMap(({ line, where }) =>
    [...line.matchAll(pattern)].map((m) => ({ what: m[0], where, groups: m.slice(1).map((g) => g ?? '') })),
  );
}

test('every cluster.X(…) and handle.X(…) that a message names is a method of Cluster or ActorHandle, called as it is called', () => {
  const calls = named(/['`"][^'`"]*?\b(cluster|handle)\.([a-zA-Z]+)\(([^)]*)/g);
  assert.ok(calls.length >= 5, `only ${calls.length} named calls found: the scan is broken`);
  const broken = calls.filter(({ groups: [on, method, args] }) => {
    const proto = (on === 'cluster' ? Cluster.prototype : ActorHandle.prototype) as unknown as Record<string, unknown>;
    const first = FIRST_ARGUMENT[method!];
    return typeof proto[method!] !== 'function' || (first !== undefined && !first.test(args!));
  });
  assert.deepEqual(
    broken.map((b) => `${b.where}: ${b.what}`),
    [],
  );
});

test('every `troupe COMMAND --flag` that a message names is a command with those flags', () => {
  const uses = named(/['`"][^'`"]*?\b(?:npx )?troupe ([a-z]+)((?: --[a-z][a-z-]*)*)/g);
  assert.ok(uses.length >= 5, `only ${uses.length} named commands found: the scan is broken`);
  const broken = uses.filter(({ groups: [name, flags] }) => {
    if (PROCESS_LABELS.has(name!)) return false;
    const command = COMMANDS.find((c) => c.name === name);
    if (!command) return true;
    const known = new Set([...command.flags.map((f) => `--${f.name}`), ...GLOBAL_FLAGS]);
    return flags!
      .split(' ')
      .filter(Boolean)
      .some((f) => !known.has(f));
  });
  assert.deepEqual(
    broken.map((b) => `${b.where}: ${b.what}`),
    [],
  );
});

test('every --flag that a message names is a flag of some troupe command', () => {
  const flags = new Set([...GLOBAL_FLAGS, ...COMMANDS.flatMap((c) => c.flags.map((f) => `--${f.name}`))]);
  const uses = named(/['`"][^'`"]*?(--[a-z][a-z-]+)/g).filter(({ groups: [flag] }) => !OTHER_PROGRAMS_FLAGS.has(flag!));
  assert.ok(uses.length >= 20, `only ${uses.length} named flags found: the scan is broken`);
  assert.deepEqual(
    uses.filter(({ groups: [flag] }) => !flags.has(flag!)).map((b) => `${b.where}: ${b.groups[0]}`),
    [],
  );
});
