import { method, model, pipeline } from '../../runtime/internal.js';
import type { ActorHandle, Cluster } from '../../runtime/internal.js';

/** The class actors' module of the streaming tests (test/fixtures/stream-steps.ts). */
export const STREAM_STEPS = 'test/fixtures/stream-steps.js';

/**
 * The streaming tests' 3-step pipeline `by-row`: a generator method yielding each input row
 * (`rows`), the MLP member13 on each, and a plain method labelling each answer (`after`).
 * Returns the generator's actor.
 */
export async function deployByRow(client: Cluster): Promise<ActorHandle> {
  const rows = await client.actor({ name: 'rows', module: STREAM_STEPS, export: 'RowStream', cpus: 0.1 });
  await client.actor({ name: 'after', module: STREAM_STEPS, export: 'RowStream', cpus: 0.1 });
  await client.deploy(
    pipeline('by-row', [
      method('split', 'rows', 'rows'),
      model('member13', { path: 'member13.onnx', threads: 1, cpus: 0.1 }),
      method('pick', 'after', 'label'),
    ]),
  );
  return rows;
}
