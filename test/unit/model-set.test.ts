import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { batchOptions } from '../../actors/batch-options.js';
import { ModelSet } from '../../actors/model-set.js';
import { buildMlp } from '../../models/index.js';
import { TroupeError, tensor } from '../../runtime/internal.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

const HEALTHY = ['a', 'b', 'c', 'd'];
const x = seededFloats(64, 5);
const input = () => ({ x: tensor('float32', [1, 64], x) });

type Counts = { loads: number; hits: number; misses: number; evictions: number; failedLoads: number };

/**
 * The reference: an LRU of `max` names. A healthy name is a hit or a load (evicting the least
 * recent past `max`); `bad` fails once and is then refused with no count at all (its back-off
 * outlasts the run); an unknown name changes nothing.
 */
function reference(max: number, calls: string[]): { counts: Map<string, Counts>; loaded: string[] } {
  const lru: string[] = [];
  const counts = new Map<string, Counts>();
  const of = (n: string) => {
    if (!counts.has(n)) counts.set(n, { loads: 0, hits: 0, misses: 0, evictions: 0, failedLoads: 0 });
    return counts.get(n)!;
  };
  let badFailed = false;
  for (const name of calls) {
    if (name === 'bad') {
      if (!badFailed) {
        of(name).misses++;
        of(name).failedLoads++;
        badFailed = true;
      } else of(name);
    } else if (HEALTHY.includes(name)) {
      const c = of(name);
      const at = lru.indexOf(name);
      if (at >= 0) {
        c.hits++;
        lru.splice(at, 1);
      } else {
        c.misses++;
        c.loads++;
      }
      lru.push(name);
      if (lru.length > max) of(lru.shift()!).evictions++;
    }
  }
  return { counts, loaded: lru };
}

type Op = { op: 'call' | 'pin' | 'unpin'; name: string };

/**
 * The reference with repository loads: `pin` loads a model (a load, neither a hit nor a miss) and
 * keeps it from eviction, at most `max` pinned (a further pin is refused); `unpin` takes it out of
 * memory without counting an eviction. The victim of an eviction is the least recently used model
 * that is not pinned and not the one just loaded; with none, the set stays over `max` (until a
 * later load finds one).
 */
function pinReference(max: number, ops: Op[]): { counts: Map<string, Counts>; loaded: string[]; errors: (string | undefined)[] } {
  const lru: string[] = [];
  const pinned = new Set<string>();
  const counts = new Map<string, Counts>();
  const errors: (string | undefined)[] = [];
  const of = (n: string) => {
    if (!counts.has(n)) counts.set(n, { loads: 0, hits: 0, misses: 0, evictions: 0, failedLoads: 0 });
    return counts.get(n)!;
  };
  let badFailed = false;
  const makeRoom = () => {
    while (lru.length > max) {
      const victim = lru.slice(0, -1).find((n) => !pinned.has(n));
      if (victim === undefined) return;
      lru.splice(lru.indexOf(victim), 1);
      of(victim).evictions++;
    }
  };
  for (const { op, name } of ops) {
    if (!HEALTHY.includes(name) && name !== 'bad') {
      errors.push('TROUPE_ERR_UNKNOWN_MODEL');
      continue;
    }
    const c = of(name);
    if (op === 'unpin') {
      pinned.delete(name);
      if (lru.includes(name)) lru.splice(lru.indexOf(name), 1);
      errors.push(undefined);
      continue;
    }
    if (op === 'pin' && !pinned.has(name) && pinned.size >= max) {
      errors.push('TROUPE_ERR_BAD_REQUEST');
      continue;
    }
    if (name === 'bad') {
      if (!badFailed) {
        if (op === 'call') c.misses++;
        c.failedLoads++;
        badFailed = true;
      }
      errors.push('TROUPE_ERR_MODEL_LOAD');
      continue;
    }
    if (op === 'pin') pinned.add(name);
    const at = lru.indexOf(name);
    if (at >= 0) {
      if (op === 'call') c.hits++;
      lru.splice(at, 1);
      lru.push(name);
    } else {
      if (op === 'call') c.misses++;
      c.loads++;
      // Room is made after a load only: a hit leaves a set that pins took over maxModels as it is.
      lru.push(name);
      makeRoom();
    }
    errors.push(undefined);
  }
  return { counts, loaded: lru, errors };
}

describe('ModelSet against an LRU reference', () => {
  let dir: string;
  const wanted = new Map<string, Float32Array>();
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'troupe-model-set-'));
    for (const [i, name] of HEALTHY.entries()) {
      const path = join(dir, `${name}.onnx`);
      await writeFile(path, buildMlp({ seed: 50 + i, hidden: [16] }).bytes);
      wanted.set(name, (await runInProcess(path, input())).logits!.data as Float32Array);
    }
    await writeFile(join(dir, 'bad.onnx'), Buffer.from('not an onnx model, just bytes'.repeat(40)));
  });
  after(async () => rm(dir, { recursive: true, force: true }));

  test('calls one after another: counts, evictions and what is loaded are exactly the LRU reference; a bad or unknown model evicts nothing (fast-check, seeded)', async () => {
    const seed = Number(process.env.FC_SEED ?? 42);
    const name = fc.constantFrom(...HEALTHY, 'bad', 'zzz');
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 3 }), fc.array(name, { minLength: 1, maxLength: 30 }), async (max, calls) => {
        // A back-off longer than the run: the one failed load of `bad` is all the reference expects.
        const retry = { first: 3_600_000, max: 3_600_000 };
        const set = new ModelSet(
          'd',
          dir,
          { maxModels: max },
          { device: 'cpu', threads: 1 },
          (metadata) => batchOptions(undefined, { metadata }),
          retry,
        );
        for (const model of calls) {
          try {
            const { outputs } = await set.run(model, () => [input(), undefined, undefined]);
            assert.ok(HEALTHY.includes(model), `${model} answered`);
            assert.deepEqual(Array.from(outputs.logits!.data as Float32Array), Array.from(wanted.get(model)!));
          } catch (err) {
            assert.ok(err instanceof TroupeError && !HEALTHY.includes(model), String(err));
            assert.equal(err.code, model === 'bad' ? 'TROUPE_ERR_MODEL_LOAD' : 'TROUPE_ERR_UNKNOWN_MODEL', err.message);
            assert.ok(!err.message.includes(dir), `a server path in: ${err.message}`);
          }
          await set.settled();
        }
        const want = reference(max, calls);
        const report = set.report();
        for (const [model, c] of want.counts) {
          const { loaded, ...got } = report[model]!;
          assert.deepEqual(got, c, model);
          assert.equal(loaded, want.loaded.includes(model), `${model} loaded`);
        }
        assert.deepEqual(Object.keys(report).sort(), [...want.counts.keys()].sort());
      }),
      { seed, numRuns: 100 },
    );
  });

  test('calls, repository loads (pins) and unloads: counts, errors and what is loaded are exactly the reference; a pinned model is never evicted (fast-check, seeded)', async () => {
    const seed = Number(process.env.FC_SEED ?? 43);
    const op = fc.record({
      op: fc.constantFrom('call' as const, 'call' as const, 'pin' as const, 'unpin' as const),
      name: fc.constantFrom(...HEALTHY, 'bad', 'zzz'),
    });
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 3 }), fc.array(op, { minLength: 1, maxLength: 30 }), async (max, ops) => {
        const set = new ModelSet(
          'd',
          dir,
          { maxModels: max },
          { device: 'cpu', threads: 1 },
          (metadata) => batchOptions(undefined, { metadata }),
          { first: 3_600_000, max: 3_600_000 },
        );
        const errors: (string | undefined)[] = [];
        for (const { op: kind, name } of ops) {
          try {
            if (kind === 'call') {
              const { outputs } = await set.run(name, () => [input(), undefined, undefined]);
              assert.deepEqual(Array.from(outputs.logits!.data as Float32Array), Array.from(wanted.get(name)!));
            } else if (kind === 'pin') await set.pin(name);
            else set.unpin(name);
            errors.push(undefined);
          } catch (err) {
            assert.ok(err instanceof TroupeError, String(err));
            assert.ok(!err.message.includes(dir), `a server path in: ${err.message}`);
            errors.push(err.code);
          }
          await set.settled();
        }
        const want = pinReference(max, ops);
        assert.deepEqual(errors, want.errors);
        const report = set.report();
        for (const [model, c] of want.counts) {
          const { loaded, ...got } = report[model]!;
          assert.deepEqual(got, c, model);
          assert.equal(loaded, want.loaded.includes(model), `${model} loaded`);
        }
        const states = Object.fromEntries(set.catalog().map((t) => [t.name, t.state]));
        for (const model of HEALTHY) assert.equal(states[model], want.loaded.includes(model) ? 'LOADED' : 'AVAILABLE', model);
      }),
      { seed, numRuns: 60 },
    );
  });

  test('a live directory: a new file is a model, a changed one is reloaded on its next call, a removed one is refused saying so', async () => {
    const live = await mkdtemp(join(tmpdir(), 'troupe-model-set-live-'));
    try {
      await writeFile(join(live, 'a.onnx'), buildMlp({ seed: 50, hidden: [16] }).bytes);
      const set = new ModelSet('d', live, { maxModels: 2 }, { device: 'cpu', threads: 1 }, (metadata) =>
        batchOptions(undefined, { metadata }),
      );
      const logits = async (name: string) =>
        Array.from((await set.run(name, () => [input(), undefined, undefined])).outputs.logits!.data as Float32Array);
      assert.deepEqual(await logits('a'), Array.from(wanted.get('a')!));
      assert.deepEqual(
        (await set.describe('a')).inputs.map((t) => t.name),
        ['x'],
      );
      await writeFile(join(live, 'n.onnx'), buildMlp({ seed: 51, hidden: [16] }).bytes);
      assert.deepEqual(
        set.catalog().map((t) => [t.name, t.state]),
        [
          ['a', 'LOADED'],
          ['n', 'AVAILABLE'],
        ],
      );
      assert.deepEqual(
        (await set.describe('n')).outputs.map((t) => t.name),
        ['logits'],
        'described from the file, not loaded',
      );
      assert.equal(set.report().n?.loads ?? 0, 0);
      // a's file now holds b's weights (a new size or mtime): taken out, and its next call loads the new file.
      await writeFile(join(live, 'a.onnx'), buildMlp({ seed: 51, hidden: [16] }).bytes);
      set.refresh();
      assert.equal(set.report().a!.loaded, false);
      assert.deepEqual(await logits('a'), Array.from(wanted.get('b')!));
      assert.equal(set.report().a!.loads, 2);
      await rm(join(live, 'a.onnx'));
      set.refresh();
      await assert.rejects(
        set.run('a', () => [input(), undefined, undefined]),
        (err: TroupeError) => {
          assert.equal(err.code, 'TROUPE_ERR_UNKNOWN_MODEL');
          assert.equal(err.message, "model 'a' of deployment 'd' was removed from its directory");
          return true;
        },
      );
      assert.deepEqual(
        set.catalog().map((t) => t.name),
        ['n'],
      );
    } finally {
      await rm(live, { recursive: true, force: true });
    }
  });
});
