import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcessByStdio } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { waitFor } from '../helpers/cluster.js';
import { childEnv } from '../helpers/env.js';
import { groupMembers, processTree, stillRunning } from '../helpers/processes.js';

const CLI = fileURLToPath(new URL('../../cli/main.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** Nothing of the caller's TROUPE_* settings leaks in (these tests are about the defaults); info, to see 'head listening'. */
const ENV = childEnv({ TROUPE_LOG_LEVEL: 'info' });
const has = (tool: string) => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0;
/** A readable log line: clock, level, component, message. */
const READABLE = /^\d\d:\d\d:\d\d\.\d{3} INFO {2}head head listening {2}url=http:\/\/127\.0\.0\.1:\d+ /m;

/** Starts `troupe head` on port 0 with `args`, waits until it listens, stops it; what it wrote to stderr. */
async function headStderr(args: string[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-log-'));
  const head: ChildProcessByStdio<null, Readable, Readable> = spawn(
    process.execPath,
    [CLI, ...args, 'head', '--port', '0', '--data-dir', dir, '--http-workers', '0'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: ENV,
    },
  );
  let stdout = '';
  let stderr = '';
  head.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  head.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise((resolve) => head.once('exit', resolve));
  try {
    await waitFor('the head to log that it listens', () => /listening on/.test(stdout) && /head listening/.test(stderr), 20_000);
    return stderr;
  } finally {
    head.kill('SIGTERM');
    await exited;
    await rm(dir, { recursive: true, force: true });
  }
}

/** Starts `troupe head` on `dir`, waits until it listens, runs `meanwhile` against it, stops it; its stdout. */
async function headRun(dir: string, meanwhile: (url: string) => Promise<void> = async () => {}): Promise<string> {
  const head = spawn(process.execPath, [CLI, 'head', '--port', '0', '--no-grpc', '--data-dir', dir, '--http-workers', '0'], {
    stdio: ['ignore', 'pipe', 'ignore'],
    env: childEnv(),
  });
  let stdout = '';
  head.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  const exited = new Promise((resolve) => head.once('exit', resolve));
  try {
    await waitFor('the head to say it listens', () => /troupe head listening on (http:\S+)/.exec(stdout)?.[1], 20_000);
    await meanwhile(/troupe head listening on (http:\S+)/.exec(stdout)![1]!);
    return stdout;
  } finally {
    head.kill('SIGTERM');
    await exited;
  }
}

describe('a quiet, readable CLI', { timeout: 120_000 }, () => {
  test('a head restarted on a data directory says what it brought back, by name', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-restored-'));
    try {
      const first = await headRun(dir, async (url) => {
        for (const name of ['alpha', 'beta']) {
          const res = await fetch(`${url}/api/v1/deployments/${name}?wait=false`, {
            method: 'PUT',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'mlp.onnx', cpus: 0.1 }),
          });
          assert.ok(res.status < 300, await res.text());
        }
      });
      assert.doesNotMatch(first, /restored/, 'a fresh data directory brings nothing back');
      const second = await headRun(dir);
      assert.match(
        second,
        new RegExp(
          `^restored from ${dir}/state\\.json: 2 deployments \\(alpha, beta\\), 0 graphs \\(troupe delete NAME removes one; another --data-dir starts empty\\)$`,
          'm',
        ),
      );
      // Before the line that says it is ready: troupe up echoes it first.
      assert.ok(second.indexOf('restored from') < second.indexOf('troupe head listening'));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test(
    'npx troupe prints no npm warning (no unknown keys in a project .npmrc)',
    { skip: has('npx') ? false : 'npx is not installed here' },
    () => {
      const out = spawnSync('npx', ['--no-install', 'troupe', '--help'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000, env: ENV });
      assert.equal(out.status, 0, out.stderr);
      assert.match(out.stdout, /^usage: troupe <command>/);
      assert.equal(out.stderr, '', 'nothing on stderr');
    },
  );

  test('logs are JSON lines when a program reads them, readable lines with --log-format pretty', async () => {
    const piped = await headStderr([]);
    const first = piped.split('\n')[0]!;
    assert.equal((JSON.parse(first) as { msg: string }).msg, 'head listening');
    assert.match(await headStderr(['--log-format', 'pretty']), READABLE);
    assert.match(piped + (await headStderr(['--log-format=json'])), /^\{"level":30,/m);
  });

  test('a bad --log-format or TROUPE_LOG_FORMAT exits 2 with TROUPE_ERR_BAD_FLAG naming it', () => {
    const flag = spawnSync(process.execPath, [CLI, 'status', '--log-format', 'xml'], { encoding: 'utf8', env: ENV, timeout: 20_000 });
    assert.equal(flag.status, 2);
    assert.match(flag.stderr, /TROUPE_ERR_BAD_FLAG: --log-format: must be pretty or json, not 'xml'/);
    const env = spawnSync(process.execPath, [CLI, 'status'], {
      encoding: 'utf8',
      env: { ...ENV, TROUPE_LOG_FORMAT: 'loud' },
      timeout: 20_000,
    });
    assert.equal(env.status, 2);
    assert.match(env.stderr, /TROUPE_ERR_BAD_FLAG: TROUPE_LOG_FORMAT: must be pretty or json, not 'loud'/);
  });

  test(
    'troupe up at a terminal, left at its log level: its own lines only, and Ctrl-C stops it without a warning',
    { skip: has('script') ? false : "util-linux's script (a terminal to run in) is not installed here" },
    async () => {
      const cwd = await mkdtemp(join(tmpdir(), 'troupe-up-quiet-'));
      const env = childEnv();
      delete env.TROUPE_LOG_LEVEL;
      const up = spawn('script', ['-qfec', `'${process.execPath}' '${CLI}' up --port 0`, '/dev/null'], {
        cwd,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
        env,
      });
      let out = '';
      up.stdout.on('data', (c: Buffer) => (out += c.toString()));
      up.stderr.on('data', (c: Buffer) => (out += c.toString()));
      const exited = new Promise((resolve) => up.once('exit', resolve));
      let tree: number[] = [];
      try {
        await waitFor('troupe up to print where the cluster is', () => /Troupe is up at http:\/\/127\.0\.0\.1:\d+/.test(out), 60_000);
        // Ctrl-C reaches the terminal's foreground group: up's (script itself sits outside it).
        tree = await processTree(up.pid!);
        const cmdlines = await Promise.all(tree.map((pid) => readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')));
        const upPid = tree[cmdlines.findIndex((c) => c.split('\0').filter(Boolean).slice(-3).join(' ') === 'up --port 0')]!;
        const stat = await readFile(`/proc/${upPid}/stat`, 'utf8');
        process.kill(-Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]), 'SIGINT');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 30_000))]);
        await waitFor('every process under up to exit', async () => (await stillRunning(tree)).length === 0, 20_000);
        const text = out.replace(/\u001b\[[0-9;]*m/g, '').replace(/\r/g, '');
        assert.match(text, /^sample inference: logits float32\[1,10\]/m);
        assert.doesNotMatch(text, /^\d\d:\d\d:\d\d\.\d{3} (INFO|WARN|ERROR) /m, `no log line at a normal start and stop:\n${text}`);
      } finally {
        for (const pid of await stillRunning(tree)) process.kill(pid, 'SIGKILL');
        for (const pid of await groupMembers(up.pid!)) process.kill(pid, 'SIGKILL');
        await rm(cwd, { recursive: true, force: true });
      }
    },
  );

  test(
    'troupe up at a terminal: readable log lines among its own, no JSON',
    { skip: has('script') ? false : "util-linux's script (a terminal to run in) is not installed here" },
    async () => {
      const cwd = await mkdtemp(join(tmpdir(), 'troupe-up-tty-'));
      // script(1) runs the command on a pseudo-terminal, as a person's shell would; its own process group.
      const up = spawn('script', ['-qfec', `'${process.execPath}' '${CLI}' up --port 0`, '/dev/null'], {
        cwd,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: ENV,
      });
      let out = '';
      up.stdout.on('data', (c: Buffer) => (out += c.toString()));
      up.stderr.on('data', (c: Buffer) => (out += c.toString()));
      const exited = new Promise((resolve) => up.once('exit', resolve));
      try {
        await waitFor('troupe up to print where the cluster is', () => /Troupe is up at http:\/\/127\.0\.0\.1:\d+/.test(out), 60_000);
        const text = out.replace(/\u001b\[[0-9;]*m/g, '').replace(/\r/g, '');
        assert.match(text, READABLE);
        assert.match(text, /^\d\d:\d\d:\d\d\.\d{3} INFO {2}actor model loaded and warmed up/m);
        assert.match(text, /^sample inference: logits float32\[1,10\]/m);
        assert.doesNotMatch(text, /^\{"level"/m, 'no JSON log line');
      } finally {
        process.kill(-up.pid!, 'SIGINT');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000))]);
        await waitFor('every process of the group to exit', async () => (await groupMembers(up.pid!)).length === 0, 20_000).catch(
          () => undefined,
        );
        for (const pid of await groupMembers(up.pid!)) process.kill(pid, 'SIGKILL');
        await rm(cwd, { recursive: true, force: true });
      }
    },
  );
});
