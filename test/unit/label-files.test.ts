import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readLabelFiles } from '../../actors/label-files.js';
import { LabelsSchema, TroupeError, classLabels, labelFilesOf } from '../../runtime/internal.js';

describe("label files (Triton's label_filename)", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'troupe-labels-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('a spec names files for every output or per output; lists stay as they are', () => {
    assert.equal(labelFilesOf(['a', 'b']), undefined);
    assert.deepEqual(labelFilesOf('labels.txt'), { '': 'labels.txt' });
    assert.deepEqual(labelFilesOf({ logits: 'l.txt', probs: ['x'] }), { logits: 'l.txt' });
    assert.deepEqual(classLabels('labels.txt', { '': ['cat', 'dog'] }), ['cat', 'dog']);
    assert.deepEqual(classLabels({ logits: 'l.txt', probs: ['x'] }, { logits: ['cat'] }), { logits: ['cat'], probs: ['x'] });
    // Not read yet (no replica READY): that output has no labels, the others keep theirs.
    assert.equal(classLabels('labels.txt', null), undefined);
    assert.deepEqual(classLabels({ logits: 'l.txt', probs: ['x'] }, null), { probs: ['x'] });
    for (const bad of ['../x.txt', '/etc/passwd', 'a/../../b', 'a\\b', '']) assert.equal(LabelsSchema.safeParse(bad).success, false, bad);
    assert.equal(LabelsSchema.safeParse('sub/labels.txt').success, true);
  });

  test('one label per line; the last newline ends the last label; CR before a newline is dropped', async () => {
    const read = async (text: string) => {
      const file = join(dir, 'l.txt');
      await writeFile(file, text);
      return (await readLabelFiles(JSON.stringify({ '': file })))[''];
    };
    assert.deepEqual(await read('cat\ndog\n'), ['cat', 'dog']);
    assert.deepEqual(await read('cat\r\ndog'), ['cat', 'dog']);
    assert.deepEqual(await read('cat\n\nemu\n'), ['cat', '', 'emu']);
    assert.deepEqual(await read(''), []);
  });

  test('a file that cannot be read, or a label too long, fails naming the file as the deploy named it', async () => {
    const rejects = (json: string, message: RegExp) =>
      assert.rejects(readLabelFiles(json, { logits: 'labels.txt' }), (err: unknown) => {
        assert.ok(err instanceof TroupeError);
        assert.equal(err.code, 'TROUPE_ERR_MODEL_PATH');
        assert.match(err.message, message);
        return true;
      });
    await rejects(JSON.stringify({ logits: join(dir, 'missing.txt') }), /^label file 'labels\.txt': cannot be read$/);
    const long = join(dir, 'long.txt');
    await writeFile(long, `ok\n${'x'.repeat(1025)}\n`);
    await rejects(JSON.stringify({ logits: long }), /^label file 'labels\.txt': line 2: a label is at most 1024 characters$/);
  });
});
