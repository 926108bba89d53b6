import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { readmeBlocks } from '../helpers/docs-blocks.js';
import { runBlock, startTroupeUp } from '../helpers/docs-run.js';
import type { DocsCluster } from '../helpers/docs-run.js';

// README.md's code blocks, in order, against the `troupe up` it tells readers to start
// (CONTRIBUTING.md: how blocks are run, and the marker for one that cannot be).
const { blocks, problems } = await readmeBlocks();

describe('README.md: every code block runs as written against troupe up', { timeout: 300_000 }, () => {
  let cluster: DocsCluster | undefined;
  before(async () => (cluster = await startTroupeUp()));
  after(async () => cluster?.stop());

  test('every fence says its language, and every marker is well formed', () => assert.deepEqual(problems, []));

  for (const block of blocks)
    test(`README.md:${block.line} (${block.lang})`, { skip: block.skip ?? false }, async () => {
      await runBlock(cluster!, block, 120_000);
    });
});
