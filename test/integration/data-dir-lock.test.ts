import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { startChild, stopChild } from '../../cli/children.js';
import { startHead } from '../../head/index.js';
import { TroupeError } from '../../runtime/internal.js';
import { childEnv } from '../helpers/env.js';

const CLI = fileURLToPath(new URL('../../cli/main.js', import.meta.url));
const env = childEnv();

/** The pid of a process that has already exited (and been reaped). */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await new Promise((resolve) => child.once('exit', resolve));
  return child.pid!;
}

/** One head per data directory: a second one refuses, naming the first; a dead one's lock is taken over. */
describe('the data directory lock', { timeout: 60_000 }, () => {
  let root: string;
  before(async () => (root = await mkdtemp(join(tmpdir(), 'troupe-lock-'))));
  after(() => rm(root, { recursive: true, force: true }));

  test('a second `troupe head` on the same --data-dir exits non-zero, naming the first head and the dir', async () => {
    const dir = join(root, 'two-heads');
    const first = startChild(['head', '--port', '0', '--data-dir', dir, '--http-workers', '0'], /listening on (\S+)/, 20_000, env);
    try {
      await first.line;
      assert.equal((await readFile(join(dir, 'head.lock'), 'utf8')).trim(), String(first.process.pid));
      const second = spawnSync(process.execPath, [CLI, 'head', '--port', '0', '--data-dir', dir, '--http-workers', '0'], {
        encoding: 'utf8',
        timeout: 20_000,
        env,
      });
      assert.equal(second.status, 1, second.stderr);
      assert.match(second.stderr, /TROUPE_ERR_DATA_DIR_LOCKED/);
      assert.match(second.stderr, new RegExp(`pid ${first.process.pid}\\b`));
      assert.ok(second.stderr.includes(dir), second.stderr);
      assert.equal(first.process.exitCode, null, 'the first head runs on');
    } finally {
      await stopChild(first, 10_000);
    }
    assert.equal(existsSync(join(dir, 'head.lock')), false, 'a clean close removes the lock');
  });

  test('a stale lock (its pid is gone) is taken over', async () => {
    const dir = join(root, 'stale');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'head.lock'), `${await deadPid()}\n`);
    const head = startChild(['head', '--port', '0', '--data-dir', dir, '--http-workers', '0'], /listening on (\S+)/, 20_000, env);
    try {
      await head.line;
      assert.equal((await readFile(join(dir, 'head.lock'), 'utf8')).trim(), String(head.process.pid));
    } finally {
      await stopChild(head, 10_000);
    }
  });

  test('in one process too: a second in-process head on the dir is refused until the first closes', async () => {
    const dir = join(root, 'in-process');
    const first = await startHead({ port: 0, dataDir: dir, httpWorkers: 0 });
    try {
      await assert.rejects(
        startHead({ port: 0, dataDir: dir, httpWorkers: 0 }),
        (err: unknown) =>
          err instanceof TroupeError && err.code === 'TROUPE_ERR_DATA_DIR_LOCKED' && err.message.includes(`pid ${process.pid}`),
      );
    } finally {
      await first.close();
    }
    const again = await startHead({ port: 0, dataDir: dir, httpWorkers: 0 });
    await again.close();
  });

  test('`troupe head` on a state file it cannot read exits non-zero, naming it and the way out; --discard-state starts empty', async () => {
    const dir = join(root, 'corrupt');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'state.json'), '{"format": 1, "savedAt": "2026-11-29T00:00:00Z", "deploym');
    const refused = spawnSync(process.execPath, [CLI, 'head', '--port', '0', '--data-dir', dir, '--http-workers', '0'], {
      encoding: 'utf8',
      timeout: 20_000,
      env,
    });
    assert.equal(refused.status, 1, refused.stderr);
    assert.match(refused.stderr, /TROUPE_ERR_STATE_UNREADABLE/);
    assert.ok(refused.stderr.includes(join(dir, 'state.json')), refused.stderr);
    assert.match(refused.stderr, /--discard-state/);
    assert.equal(existsSync(join(dir, 'head.lock')), false, 'the refusing head leaves no lock');
    const head = startChild(
      ['head', '--port', '0', '--data-dir', dir, '--http-workers', '0', '--discard-state'],
      /listening on (\S+)/,
      20_000,
      env,
    );
    try {
      await head.line;
    } finally {
      await stopChild(head, 10_000);
    }
    assert.ok((await readdir(dir)).some((f) => f.startsWith('state.json.discarded-')));
  });
});
