import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ActorLedger } from '../../node-agent/orphans.js';
import { isAlive, waitFor } from '../helpers/cluster.js';

let dir: string;
const started: number[] = [];
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-ledger-'));
});
after(async () => {
  for (const pid of started) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

function sleeper(env: Record<string, string>): number {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { env: { ...process.env, ...env }, stdio: 'ignore' });
  started.push(child.pid!);
  return child.pid!;
}

test('a restarted agent kills the actors its previous run left, and only those', async () => {
  const orphan = sleeper({ TROUPE_ACTOR_ID: 'a1' });
  const stranger = sleeper({ TROUPE_ACTOR_ID: 'someone-else' });
  // A process whose parent is a live agent (its command line says so) is not an orphan.
  const agentLike = spawn(
    process.execPath,
    [
      '-e',
      `require('child_process').spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { env: { ...process.env, TROUPE_ACTOR_ID: 'a3' }, stdio: 'ignore' }); setInterval(() => {}, 1000)`,
      'agent',
    ],
    { stdio: 'ignore' },
  );
  started.push(agentLike.pid!);
  const child = await waitFor('the agent-like process to start its actor', async () => {
    const { readFile } = await import('node:fs/promises');
    const kids = await readFile(`/proc/${agentLike.pid}/task/${agentLike.pid}/children`, 'utf8').catch(() => '');
    const pid = Number(kids.trim().split(' ')[0]);
    return pid > 0 ? pid : undefined;
  });
  started.push(child);
  const ledger = new ActorLedger(join(dir, 'actors.json'));
  await ledger.record([
    { actorId: 'a1', pid: orphan },
    { actorId: 'a2', pid: stranger },
    { actorId: 'a3', pid: child },
  ]);
  const killed = await new ActorLedger(join(dir, 'actors.json')).killOrphans();
  assert.deepEqual(killed, [orphan]);
  await waitFor('the orphan to exit', () => !isAlive(orphan), 5000);
  assert.ok(isAlive(stranger), 'a process with another actor id (a recycled pid) is left alone');
  assert.ok(isAlive(child), 'an actor whose agent is alive is left alone');
});

test('a missing or corrupt ledger kills nothing', async () => {
  assert.deepEqual(await new ActorLedger(join(dir, 'none.json')).killOrphans(), []);
});

test("temp files of writes an earlier run never finished are removed; a live process's are left", async () => {
  const { readdir, writeFile } = await import('node:fs/promises');
  const sub = await mkdtemp(join(dir, 'temps-'));
  const gone = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
  const deadPid = gone.pid!;
  await new Promise((resolve) => gone.once('exit', resolve));
  await writeFile(join(sub, `actors.json.${deadPid}.tmp`), '');
  // Another live process (an agent writing now), not this one: killOrphans' own write uses this pid.
  const writer = sleeper({});
  await writeFile(join(sub, `actors.json.${writer}.tmp`), '');
  await new ActorLedger(join(sub, 'actors.json')).killOrphans();
  assert.deepEqual(await readdir(sub), [`actors.json.${writer}.tmp`]);
});
