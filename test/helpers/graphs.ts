import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GraphBuilder, buildMlp } from '../../models/index.js';
import { TroupeError } from '../../runtime/internal.js';
import type { ErrorCode, Tensor } from '../../runtime/internal.js';

/** The compiled tree (dist/): agents in graph tests use it as their --module-dir. */
export const DIST_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Where the test fn fixtures are, as a graph names them. */
export const FNS = 'test/fixtures/fns.js';

/**
 * Agent flags for graph tests: fn modules from dist/, and CPUs to spare, since a graph deploys
 * many small actors and each reserves a CPU by default.
 */
export const GRAPH_AGENT = ['--module-dir', DIST_ROOT, '--cpus', '64'];

/**
 * Writes the extra models the graph tests use into `dir`: three 64->10 MLPs with different
 * weights (ensemble members), three 64->64 MLPs (pipeline links) and a two-input adder.
 */
export async function writeGraphModels(dir: string): Promise<void> {
  for (const seed of [11, 12, 13]) await writeFile(join(dir, `member${seed}.onnx`), buildMlp({ seed, hidden: [32] }).bytes);
  for (const seed of [21, 22, 23]) await writeFile(join(dir, `link${seed}.onnx`), buildMlp({ seed, hidden: [32], outputDim: 64 }).bytes);
  const g = new GraphBuilder('add');
  g.input('a', 'float32', ['N', 64]);
  g.input('b', 'float32', ['N', 64]);
  g.node('Add', ['a', 'b'], ['sum']);
  g.output('sum', 'float32', ['N', 64]);
  await writeFile(join(dir, 'add.onnx'), g.toBytes());
}

export function floats(t: Tensor | undefined): number[] {
  assert.ok(t, 'tensor is missing');
  return [...(t.data as Float32Array)];
}

/** Asserts that `work` rejects with a TroupeError of `code` whose message matches. */
export async function rejectsWith(work: PromiseLike<unknown>, code: ErrorCode, message: RegExp): Promise<TroupeError> {
  let error: TroupeError | undefined;
  await assert.rejects(
    () => Promise.resolve(work),
    (err: unknown) => {
      assert.ok(err instanceof TroupeError, `expected a TroupeError, got ${String(err)}`);
      assert.equal(err.code, code, err.message);
      assert.match(err.message, message);
      error = err;
      return true;
    },
  );
  return error!;
}
