import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { pagesBlocks } from '../helpers/docs-blocks.js';
import { runBlock, startTroupeUp } from '../helpers/docs-run.js';
import type { DocsCluster } from '../helpers/docs-run.js';

// The code blocks of every page in docs/, in the order README.md lists the pages, against one
// `troupe up`: what the pages deploy stays deployed, so this also holds the docs' claim that a
// 2-core machine running troupe up holds every example at once (CONTRIBUTING.md).
const { blocks, problems } = await pagesBlocks();

describe('docs/: every code block runs as written against troupe up', { timeout: 600_000 }, () => {
  let cluster: DocsCluster | undefined;
  before(async () => (cluster = await startTroupeUp()));
  after(async () => cluster?.stop());

  test('every fence says its language, and every marker is well formed', () => assert.deepEqual(problems, []));

  for (const block of blocks)
    test(`${block.file}:${block.line} (${block.lang})`, { skip: block.skip ?? false }, async () => {
      await runBlock(cluster!, block, 120_000);
    });
});
