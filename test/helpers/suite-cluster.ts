import { after, before } from 'node:test';
import { connect } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster } from './cluster.js';
import type { TestCluster } from './cluster.js';

/**
 * A cluster (head and agent, as `startCluster` starts them) and an SDK client of it for the
 * enclosing suite: started before its first test, stopped after its last. Read them from the
 * returned object inside tests (they are set once the suite's `before` ran).
 */
export function suiteCluster(...args: Parameters<typeof startCluster>): { cluster: TestCluster; client: Cluster } {
  const held = {} as { cluster: TestCluster; client: Cluster };
  before(async () => {
    held.cluster = await startCluster(...args);
    held.client = await connect(held.cluster.url);
  });
  after(async () => {
    await held.client?.close();
    await held.cluster?.stop();
  });
  return held;
}
