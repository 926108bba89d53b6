import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { TroupeError, connect } from '../../runtime/internal.js';
import { isAlive, waitFor } from '../helpers/cluster.js';
import { childEnv } from '../helpers/env.js';

const CLI = fileURLToPath(new URL('../../cli/main.js', import.meta.url));

/** A troupe process with both output streams captured. */
function troupe(args: string[]): { child: ChildProcess; out: () => string; err: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: childEnv({}, 'info') });
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, out: () => out, err: () => err, exited };
}

describe('joining a head that has a cluster token', { timeout: 60_000 }, () => {
  const started: ChildProcess[] = [];
  let dir: string;
  after(async () => {
    for (const c of started.reverse()) if (c.pid && isAlive(c.pid)) c.kill('SIGTERM');
    await Promise.all(
      started.map((c) => (c.exitCode === null && c.signalCode === null ? new Promise((r) => c.once('exit', r)) : undefined)),
    );
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('a wrong token is refused with a clear message on both sides; the right one joins', async () => {
    dir = await mkdtemp(join(tmpdir(), 'troupe-token-'));
    const head = troupe(['head', '--port', '0', '--token', 'right-token-123', '--data-dir', join(dir, 'head')]);
    started.push(head.child);
    const url = await waitFor('the head to listen', () => /listening on (\S+)/.exec(head.out())?.[1]);

    const wrong = troupe(['agent', '--head', url, '--name', 'intruder', '--token', 'wrong-token-456', '--state-dir', join(dir, 'a1')]);
    started.push(wrong.child);
    assert.equal(await wrong.exited, 1, wrong.err());
    assert.match(wrong.err(), /TROUPE_ERR_UNAUTHORIZED: head refused this agent: missing or wrong cluster token/);
    await waitFor('the head to log the refusal', () => /refused a connection with a missing or wrong token/.test(head.err()));

    const right = troupe([
      'agent',
      '--head',
      url,
      '--name',
      'member',
      '--token',
      'right-token-123',
      '--model-dir',
      dir,
      '--state-dir',
      join(dir, 'a2'),
    ]);
    started.push(right.child);
    await waitFor('the agent to join', () => /joined/.test(right.out()));

    await assert.rejects(
      () => connect(url, { token: 'nope-nope-nope' }),
      (err: unknown) => err instanceof TroupeError && err.code === 'TROUPE_ERR_UNAUTHORIZED',
    );
    const client = await connect(url, { token: 'right-token-123' });
    assert.deepEqual(
      (await client.describe()).nodes.map((n) => n.name),
      ['member'],
    );
    await client.close();
    for (const text of [head.err(), wrong.err(), right.err()])
      assert.doesNotMatch(text, /right-token-123|wrong-token-456/, 'tokens never appear in logs');
  });
});
