import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { docBlocks, docPages, pagesBlocks, readmeBlocks } from '../helpers/docs-blocks.js';

const page = (...lines: string[]) => lines.join('\n');

describe('docs code blocks (what test/integration/docs-*.test.ts run)', () => {
  test('ts, js, sh and bash blocks are runnable; text and json are output and are not run', () => {
    const { blocks, problems } = docBlocks(
      'p.md',
      page('intro', '```ts', 'const a: number = 1;', '```', '```text', 'out', '```', '```json', '{}', '```', '```bash', 'echo hi', '```'),
    );
    assert.deepEqual(problems, []);
    assert.deepEqual(
      blocks.map((b) => [b.line, b.kind, b.code]),
      [
        [2, 'ts', 'const a: number = 1;'],
        [11, 'sh', 'echo hi'],
      ],
    );
  });

  test('a fence without a language, or with one the tests do not know, is a problem naming file:line', () => {
    const { blocks, problems } = docBlocks('p.md', page('```', 'npm start', '```', '', '```python', 'print(1)', '```'));
    assert.deepEqual(blocks, []);
    assert.match(problems[0]!, /^p\.md:1: no language: tag it/);
    assert.match(problems[1]!, /^p\.md:5: language 'python'/);
  });

  test('a skip marker on the last non-blank line before a fence carries its reason; a malformed or misplaced one is a problem', () => {
    const skipped = docBlocks('p.md', page('<!-- docs-test: skip (needs a GPU) -->', '', '```sh', 'nvidia-smi', '```'));
    assert.deepEqual(skipped.problems, []);
    assert.equal(skipped.blocks[0]!.skip, 'needs a GPU');
    // A marker only covers the fence right after it.
    const once = docBlocks('p.md', page('<!-- docs-test: skip (x) -->', '```sh', 'a', '```', '```sh', 'b', '```'));
    assert.deepEqual(
      once.blocks.map((b) => b.skip),
      ['x', undefined],
    );
    assert.match(docBlocks('p.md', page('<!-- docs-test: skip -->', '```sh', 'a', '```')).problems[0]!, /p\.md:2: the marker/);
    assert.match(docBlocks('p.md', page('<!-- docs-test: skip (x) -->', '```text', 'a', '```')).problems[0]!, /never run/);
  });

  test('a block indented in a list item loses its indentation; an unclosed fence is a problem', () => {
    const { blocks } = docBlocks('p.md', page('- item:', '', '  ```sh', '  echo one', '    echo two', '  ```'));
    assert.equal(blocks[0]!.code, 'echo one\n  echo two');
    assert.match(docBlocks('p.md', page('```sh', 'echo')).problems[0]!, /never closed/);
  });

  test('README.md and every page of docs/ tag every fence and mark skips well; pages in the README table order', async () => {
    assert.deepEqual((await readmeBlocks()).problems, []);
    assert.deepEqual((await pagesBlocks()).problems, []);
    const pages = await docPages();
    assert.equal(pages[0], 'docs/sdk.md');
    assert.ok(pages.includes('docs/errors.md'));
  });
});
