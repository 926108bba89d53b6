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
});
