import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { waitFor } from '../helpers/cluster.js';
import { childEnv } from '../helpers/env.js';
import { groupMembers } from '../helpers/processes.js';

const CLI = fileURLToPath(new URL('../../cli/main.js', import.meta.url));

function troupe(args: string[]) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 20_000 });
}

describe('CLI', { timeout: 120_000 }, () => {
  test('--help lists every command with a one-line description', () => {
    const out = troupe(['--help']);
    assert.equal(out.status, 0);
    for (const command of ['up', 'head', 'agent']) assert.match(out.stdout, new RegExp(`^  ${command}\\s+\\S.*$`, 'm'));
    const agentHelp = troupe(['agent', '--help']);
    assert.match(agentHelp.stdout, /--simulate-gpus N/);
  });

  test('bad flags and commands exit 2 with TROUPE_ERR_BAD_FLAG naming the problem', () => {
    const cases: [string[], RegExp][] = [
      [['launch'], /unknown command 'launch'/],
      [['head', '--port', 'abc'], /--port: .*number/i],
      [['head', '--port', '70000'], /--port: .*65535/],
      [['head', '--bogus'], /Unknown option '--bogus'/],
      [['head', '--host', '0.0.0.0', '--port', '0'], /refusing to listen on 0\.0\.0\.0 without a cluster token/],
      [['agent'], /--head: is required/],
      [['agent', '--head', 'ftp://x'], /--head: must be a ws:\/\/ or http:\/\/ URL/],
      [['agent', '--head', 'ws://127.0.0.1:1', '--simulate-gpus', '1.5'], /--simulate-gpus: must be a whole number/],
    ];
    for (const [args, message] of cases) {
      const out = troupe(args);
      assert.equal(out.status, 2, `${args.join(' ')}: ${out.stderr}`);
      assert.match(out.stderr, /TROUPE_ERR_BAD_FLAG/, args.join(' '));
      assert.match(out.stderr, message, args.join(' '));
    }
  });

  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    test(`troupe up serves a sample inference, and ${signal} to its process group leaves no troupe process behind`, async () => {
      const cwd = await mkdtemp(join(tmpdir(), 'troupe-up-'));
      // detached: a process group of its own, as a shell gives a foreground job.
      const up = spawn(process.execPath, [CLI, 'up', '--port', '0'], {
        cwd,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: childEnv(),
      });
      let stdout = '';
      up.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      up.stderr.resume();
      const exited = new Promise<number | null>((resolve) => up.once('exit', (code) => resolve(code)));
      const pgid = up.pid!;
      try {
        await waitFor('troupe up to print where the cluster is', () => /Troupe is up at http:\/\/127\.0\.0\.1:\d+/.test(stdout), 60_000);
        assert.match(stdout, /sample inference: logits float32\[1,10\] = \[.+\], argmax \d/);
        const members = await groupMembers(pgid);
        // up, head, agent and the mlp actor.
        assert.ok(members.length >= 4, `expected at least 4 processes in the group, got ${members.length}`);
        process.kill(-pgid, signal);
        assert.equal(await Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), 20_000))]), 0);
        await waitFor('every process of the group to exit', async () => (await groupMembers(pgid)).length === 0, 20_000);
      } finally {
        for (const pid of await groupMembers(pgid)) process.kill(pid, 'SIGKILL');
        await rm(cwd, { recursive: true, force: true });
      }
    });
  }
});
