import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

// The C-level tests of the addons in native/: each harness in test/native/ includes an addon's
// source, loads it through its NAPI_MODULE entry point over a stand-in Node-API, and calls its
// functions (descriptor handoff and refusals, shared regions and their refusals, the accept loop's
// thread over real TCP connections). Built here with the flags of scripts/build-native.mjs (and an
// addon's own, such as -pthread) plus AddressSanitizer and UndefinedBehaviorSanitizer, so a leaked
// descriptor, an out-of-bounds access or undefined behaviour fails the suite.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CC = process.env.CC ?? 'cc';
// `flags`: what the addon needs past WARNINGS, as scripts/build-native.mjs builds it.
const HARNESSES: { name: string; source: string; flags?: string[] }[] = [
  { name: 'troupe_handoff', source: 'handoff-test.c' },
  { name: 'troupe_shm', source: 'shm-test.c' },
  { name: 'troupe_accept', source: 'accept-test.c', flags: ['-pthread'] },
];

function compilerMissing(): string | undefined {
  if (process.platform !== 'linux') return `the addons are Linux-only (this is ${process.platform})`;
  const probe = spawnSync(CC, ['--version'], { stdio: 'ignore' });
  return probe.error ? `no C compiler (${CC}: ${probe.error.message}); .ci/run installs gcc, so CI runs these` : undefined;
}

const missing = compilerMissing();
if (missing) process.stdout.write(`native addon C tests skipped: ${missing}\n`);

describe('the native addons, in C under AddressSanitizer and UBSan', { timeout: 120_000 }, () => {
  const out = mkdtempSync(join(tmpdir(), 'troupe-native-test-'));
  after(() => rmSync(out, { recursive: true, force: true }));

  for (const harness of HARNESSES) {
    test(`${harness.source}: ${harness.name}`, { skip: missing }, async () => {
      const { WARNINGS } = (await import(join(ROOT, 'scripts', 'build-native.mjs'))) as { WARNINGS: string[] };
      const headers = (createRequire(import.meta.url)('node-api-headers') as { include_dir: string }).include_dir;
      const binary = join(out, harness.name);
      const dir = join(ROOT, 'test', 'native');
      const flags = [
        '-g',
        '-O1',
        ...WARNINGS,
        ...(harness.flags ?? []),
        '-fsanitize=address,undefined',
        '-fno-sanitize-recover=all',
        '-fno-omit-frame-pointer',
      ];
      try {
        execFileSync(
          CC,
          [
            ...flags,
            `-DNODE_GYP_MODULE_NAME=${harness.name}`,
            `-I${headers}`,
            '-o',
            binary,
            join(dir, harness.source),
            join(dir, 'napi-fake.c'),
          ],
          {
            stdio: ['ignore', 'pipe', 'pipe'],
            timeout: 60_000,
          },
        );
      } catch (err) {
        assert.fail(
          `${CC} could not build ${harness.source}:\n${(err as { stderr?: Buffer }).stderr?.toString() ?? (err as Error).message}`,
        );
      }
      const run = spawnSync(binary, [], {
        encoding: 'utf8',
        timeout: 60_000,
        env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1:abort_on_error=0', UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1' },
      });
      assert.equal(run.status, 0, `${harness.source} failed (status ${run.status}, signal ${run.signal}):\n${run.stdout}${run.stderr}`);
      assert.match(run.stdout, /every check passed/);
    });
  }
});
