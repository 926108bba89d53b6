import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { waitFor } from '../helpers/cluster.js';
import { childEnv } from '../helpers/env.js';
import { groupMembers, processTree, stillRunning } from '../helpers/processes.js';

const CLI = fileURLToPath(new URL('../../cli/main.js', import.meta.url));

function troupe(args: string[]) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 20_000 });
}

/** Two ports side by side held by this process (P and P+1), as an earlier head or another program would hold them. */
async function twoAdjacentPorts(): Promise<{ ports: [number, number]; close(): Promise<void> }> {
  const listen = (port: number) =>
    new Promise<Server | undefined>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(undefined));
      server.listen(port, '127.0.0.1', () => resolve(server));
    });
  const close = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));
  for (let attempt = 0; attempt < 50; attempt++) {
    const first = (await listen(0))!;
    const port = (first.address() as { port: number }).port;
    const second = port < 65_535 ? await listen(port + 1) : undefined;
    if (second) return { ports: [port, port + 1], close: async () => void (await Promise.all([close(first), close(second)])) };
    await close(first);
  }
  throw new Error('no two adjacent free ports in 50 tries');
}

describe('CLI', { timeout: 120_000 }, () => {
  test('--help lists every command with a one-line description', () => {
    const out = troupe(['--help']);
    assert.equal(out.status, 0);
    for (const command of ['up', 'head', 'agent']) assert.match(out.stdout, new RegExp(`^  ${command}\\s+\\S.*$`, 'm'));
    const agentHelp = troupe(['agent', '--help']);
    assert.match(agentHelp.stdout, /--simulate-gpus N/);
  });

  test('a head port in use, and --http-handoff without workers, are bad flags (exit 2), as a gRPC port in use is', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-head-flags-'));
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = String((taken.address() as { port: number }).port);
      const busy = troupe(['head', '--port', port, '--no-grpc', '--data-dir', join(dir, 'a')]);
      assert.equal(busy.status, 2, busy.stderr);
      assert.match(
        busy.stderr,
        new RegExp(`TROUPE_ERR_BAD_FLAG: cannot listen on 127\\.0\\.0\\.1:${port}: .*EADDRINUSE.* \\(see --port\\)`),
      );
      const handoff = troupe(['head', '--port', '0', '--http-handoff', '--http-workers', '0', '--data-dir', join(dir, 'b')]);
      assert.equal(handoff.status, 2, handoff.stderr);
      assert.match(handoff.stderr, /TROUPE_ERR_BAD_FLAG: head: --http-handoff needs --http-workers above 0/);
    } finally {
      taken.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('with both ports taken, one error names both and how to move them; TROUPE_PORT alone moves gRPC beside it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-head-ports-'));
    const taken = await twoAdjacentPorts();
    try {
      const [http, grpc] = taken.ports;
      const busy = troupe(['head', '--port', String(http), '--data-dir', join(dir, 'a')]);
      assert.equal(busy.status, 2, busy.stderr);
      assert.match(busy.stderr, new RegExp(`cannot serve gRPC on 127\\.0\\.0\\.1:${grpc}: .*EADDRINUSE.*\\(see --grpc-port\\)`));
      assert.match(busy.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${http}: .*EADDRINUSE.*\\(see --port\\)`));
      assert.match(busy.stderr, /To move both, give --port P alone \(or TROUPE_PORT=P\): gRPC then listens on P\+1/);
      // The same two ports from TROUPE_PORT alone: the gRPC port it names is the one beside it.
      const viaEnv = spawnSync(process.execPath, [CLI, 'head', '--data-dir', join(dir, 'b')], {
        encoding: 'utf8',
        timeout: 20_000,
        env: childEnv({ TROUPE_PORT: String(http) }),
      });
      assert.equal(viaEnv.status, 2, viaEnv.stderr);
      assert.match(viaEnv.stderr, new RegExp(`cannot serve gRPC on 127\\.0\\.0\\.1:${grpc}:`));
      assert.match(viaEnv.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${http}:`));
      // troupe up shows the head's error, then says where it is, as the bad flag it is (exit 2).
      const viaUp = spawnSync(process.execPath, [CLI, 'up', '--port', String(http), '--data-dir', join(dir, 'c')], {
        encoding: 'utf8',
        timeout: 60_000,
        env: childEnv(),
      });
      assert.equal(viaUp.status, 2, viaUp.stderr);
      assert.match(viaUp.stderr, new RegExp(`cannot serve gRPC on 127\\.0\\.0\\.1:${grpc}:.*cannot listen on 127\\.0\\.0\\.1:${http}:`));
      assert.match(viaUp.stderr, /TROUPE_ERR_BAD_FLAG: troupe head exited \(code 2\) before it was ready: its error is above/);
    } finally {
      await taken.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('a head refused for listening beyond loopback without a token makes no data directory', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-head-refused-'));
    try {
      const out = troupe(['head', '--host', '0.0.0.0', '--port', '0', '--data-dir', join(dir, 'x', 'head')]);
      assert.equal(out.status, 2, out.stderr);
      assert.match(out.stderr, /refusing to listen on 0\.0\.0\.0 without a cluster token/);
      assert.deepEqual(await readdir(dir), []);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('bad flags and commands exit 2 with TROUPE_ERR_BAD_FLAG naming the problem', () => {
    const cases: [string[], RegExp][] = [
      [['launch'], /unknown command 'launch'/],
      [['head', '--port', 'abc'], /--port: .*number/i],
      [['head', '--port', '70000'], /--port: .*65535/],
      [['head', '--bogus'], /Unknown option '--bogus'/],
      [['head', '--host', '0.0.0.0', '--port', '0'], /refusing to listen on 0\.0\.0\.0 without a cluster token/],
      [['agent'], /--head: is required/],
      [['agent', '--head', 'ftp://x'], /--head: must be a ws:\/\/, wss:\/\/, http:\/\/ or https:\/\/ URL/],
      [['status', '--head', 'http://127.0.0.1:abc'], /--head: must be an http:\/\/ \(or ws:\/\/\) URL with a numeric port/],
      [['agent', '--head', 'ws://127.0.0.1:1', '--simulate-gpus', '1.5'], /--simulate-gpus: must be a whole number/],
      [
        ['agent', '--head', 'ws://127.0.0.1:1', '--model-dir', join(tmpdir(), 'troupe-no-such-model-dir')],
        /--model-dir: no such directory/,
      ],
    ];
    for (const [args, message] of cases) {
      const out = troupe(args);
      assert.equal(out.status, 2, `${args.join(' ')}: ${out.stderr}`);
      assert.match(out.stderr, /TROUPE_ERR_BAD_FLAG/, args.join(' '));
      assert.match(out.stderr, message, args.join(' '));
    }
  });

  // To the group, as a terminal's Ctrl-C sends it (every process gets the signal), or to up alone, as a supervisor does.
  for (const [signal, to] of [
    ['SIGINT', 'its process group'],
    ['SIGTERM', 'its process group'],
    ['SIGTERM', 'up alone'],
  ] as const) {
    test(`troupe up serves a sample inference, and ${signal} to ${to} under load answers what it accepted and leaves no troupe process behind`, async () => {
      const cwd = await mkdtemp(join(tmpdir(), 'troupe-up-'));
      // detached: a process group of its own, as a shell gives a foreground job (Ctrl-C signals the group).
      const up = spawn(process.execPath, [CLI, 'up', '--port', '0'], {
        cwd,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: childEnv(),
      });
      let stdout = '';
      let stderr = '';
      up.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      up.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      let done = false;
      const exited = new Promise<number | null>((resolve) =>
        up.once('exit', (code) => {
          done = true;
          resolve(code);
        }),
      );
      let tree: number[] = [];
      try {
        await waitFor('troupe up to print where the cluster is', () => /Troupe is up at http:\/\/127\.0\.0\.1:\d+/.test(stdout), 60_000);
        assert.match(stdout, /sample inference: logits float32\[1,10\] = \[.+\], argmax \d/);
        const url = /Troupe is up at (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout)![1]!;
        tree = await processTree(up.pid!);
        // up, head, its front-door workers, agent and the mlp actor.
        assert.ok(tree.length >= 5, `expected at least 5 processes under up, got ${tree.length}`);
        // Four clients calling the model without pause while the signal comes.
        const answers = new Map<string, number>();
        const body = JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: new Array(64).fill(0.5) }] });
        const clients = Array.from({ length: 4 }, async () => {
          while (!done) {
            const answer = await fetch(`${url}/v2/models/mlp/infer`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body,
            }).then(
              async (r) => `${r.status}${r.status === 200 ? '' : ` ${/TROUPE_ERR_\w+/.exec(await r.text())?.[0]}`}`,
              // The connection itself may close under a request as the head goes (or be refused after).
              () => 'no answer',
            );
            answers.set(answer, (answers.get(answer) ?? 0) + 1);
          }
        });
        await waitFor('answers before the signal', () => (answers.get('200') ?? 0) >= 20, 30_000);
        process.kill(to === 'up alone' ? up.pid! : -up.pid!, signal);
        assert.equal(await Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), 30_000))]), 0);
        await Promise.all(clients);
        // What the cluster took was answered: the model's result, or the drain's retryable refusal.
        for (const answer of answers.keys())
          assert.match(answer, /^(200|503 TROUPE_ERR_SHUTTING_DOWN|no answer)$/, JSON.stringify([...answers]));
        assert.doesNotMatch(stderr, /calls still unfinished after the drain period/);
        await waitFor('every process under up to exit', async () => (await stillRunning(tree)).length === 0, 20_000);
        // The agent's list of actors is under --data-dir (not the temp folder every `troupe up` shares),
        // says none runs, and no temp file of a write is left beside it.
        const agentDir = join(cwd, '.troupe', 'agent');
        assert.deepEqual(JSON.parse(await readFile(join(agentDir, 'actors.json'), 'utf8')), []);
        assert.deepEqual(await readdir(agentDir), ['actors.json']);
      } finally {
        for (const pid of await stillRunning(tree)) process.kill(pid, 'SIGKILL');
        for (const pid of await groupMembers(up.pid!)) process.kill(pid, 'SIGKILL');
        await rm(cwd, { recursive: true, force: true });
      }
    });
  }
});
