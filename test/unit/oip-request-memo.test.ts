import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InferRequestSchema, decodeInferRequest, encodeInferResponse } from '../../runtime/oip/codec.js';
import { MEMO_ENTRIES, MEMO_MAX_HEADER_BYTES, checkedInferRequest, parseInferRequest } from '../../runtime/oip/request-memo.js';
import { TroupeError } from '../../runtime/internal.js';
import type { ErrorCode, InferTarget, ModelMetadata, WireTensorMap } from '../../runtime/internal.js';

const metadata = (): ModelMetadata => ({
  inputs: [{ name: 'x', dtype: 'float32', shape: [-1, 4] }],
  outputs: [{ name: 'y', dtype: 'float32', shape: [-1, 2] }],
});
const model = (name = 'mlp', meta = metadata()): InferTarget => ({ name, kind: 'model', metadata: meta });

const header = (id = 'r1', extra = '') =>
  Buffer.from(
    `{"id":"${id}","inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","parameters":{"binary_data_size":16}}],` +
      `"parameters":{"binary_data_output":true}${extra}}`,
  );

/** The error `fn` throws, which must be a TroupeError. */
function failure(fn: () => unknown): { code: ErrorCode; message: string } {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof TroupeError, String(err));
    return { code: err.code, message: err.message };
  }
  assert.fail('expected a TroupeError');
}

describe('memo of checked inference request headers', () => {
  test('a byte-identical header for the same target gives back the same frozen, checked request', () => {
    const target = model();
    const first = checkedInferRequest(header(), target);
    assert.deepEqual(first, parseInferRequest(header(), target));
    const again = checkedInferRequest(Buffer.from(header()), target);
    assert.equal(again, first);
    assert.ok(Object.isFrozen(again) && Object.isFrozen(again.inputs[0]) && Object.isFrozen(again.inputs[0]!.shape));
    // Same name and signature in another target object (a connection's own, a graph's made per request): still the same.
    assert.equal(checkedInferRequest(header(), { ...target }), first);
    assert.equal(checkedInferRequest(header(), { ...target, metadata: { ...target.metadata! } }), first);
  });

  test('each call decoded from a kept request gets tensors of its own shape', () => {
    const target = model();
    const request = checkedInferRequest(header(), target);
    assert.equal(checkedInferRequest(header(), target), request);
    const a = decodeInferRequest(request, Buffer.alloc(16));
    const b = decodeInferRequest(request, Buffer.alloc(16));
    assert.deepEqual(a.inputs.x!.shape, [1, 4]);
    assert.notEqual(a.inputs.x!.shape, b.inputs.x!.shape);
    a.inputs.x!.shape.push(1);
    assert.deepEqual(request.inputs[0]!.shape, [1, 4]);
  });

  test('any other byte, another target, or another name is checked again', () => {
    const target = model();
    const first = checkedInferRequest(header(), target);
    const spaced = checkedInferRequest(Buffer.from(` ${header().toString()}`), target);
    assert.notEqual(spaced, first);
    assert.deepEqual(spaced, first);
    assert.notEqual(checkedInferRequest(header('r2'), target), first);
    assert.notEqual(checkedInferRequest(header(), model('mlp', metadata())), first, 'another signature');
    assert.notEqual(checkedInferRequest(header(), model('other', target.metadata!)), first, 'another name');
    assert.notEqual(checkedInferRequest(header(), { ...target, kind: 'fn', metadata: { inputs: [], outputs: [] } }), first);
  });

  test('a header that failed is checked in full again, with the same code and message', () => {
    const target = model();
    const bad = [
      Buffer.from('{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP99","parameters":{"binary_data_size":16}}]}'),
      Buffer.from('{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32"}],"outputs":7}'),
      Buffer.from('{"inputs":['),
      header('r1', ',"id":1'),
    ];
    for (const json of bad) {
      const once = failure(() => checkedInferRequest(json, target));
      assert.equal(once.code.startsWith('TROUPE_ERR_BAD_'), true, once.message);
      assert.deepEqual(
        failure(() => checkedInferRequest(json, target)),
        once,
      );
      assert.deepEqual(
        failure(() => parseInferRequest(json, target)),
        once,
      );
    }
  });

  test('headers with inline "data", or longer than the limit, are never kept', () => {
    const target = model();
    const inline = Buffer.from('{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}');
    assert.notEqual(checkedInferRequest(inline, target), checkedInferRequest(inline, target));
    const escaped = Buffer.from('{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","\\u0064ata":[1,2,3,4]}]}');
    const parsed = checkedInferRequest(escaped, target);
    assert.deepEqual(parsed.inputs[0]!.data, [1, 2, 3, 4]);
    assert.notEqual(checkedInferRequest(escaped, target), parsed);
    const long = header('r'.repeat(200), `,"outputs":[${Array.from({ length: 400 }, (_, i) => `{"name":"y${i}"}`).join(',')}]`);
    assert.ok(long.length > MEMO_MAX_HEADER_BYTES);
    assert.notEqual(checkedInferRequest(long, target), checkedInferRequest(long, target));
  });

  test(`at most ${MEMO_ENTRIES} headers are kept: the first kept goes first`, () => {
    const target = model();
    const first = checkedInferRequest(header('h0'), target);
    const requests = [first];
    for (let i = 1; i < MEMO_ENTRIES; i++) requests.push(checkedInferRequest(header(`h${i}`), target));
    assert.equal(checkedInferRequest(header('h0'), target), first, 'all kept while within the bound');
    const newest = checkedInferRequest(header(`h${MEMO_ENTRIES}`), target);
    assert.equal(checkedInferRequest(header(`h${MEMO_ENTRIES}`), target), newest);
    assert.equal(checkedInferRequest(header('h0'), target) === first, false, 'the oldest was forgotten');
    assert.equal(checkedInferRequest(header(`h${MEMO_ENTRIES - 1}`), target), requests[MEMO_ENTRIES - 1]);
  });
});

describe("a kept request's response header", () => {
  const y = (rows: number): WireTensorMap => ({ y: { dtype: 'float32', shape: [rows, 2], data: new Uint8Array(rows * 8).fill(rows) } });

  test('is reused only while model, order, dtypes and shapes match, and gives the bytes a fresh encoding gives', () => {
    const target = model();
    const kept = checkedInferRequest(header(), target);
    assert.equal(checkedInferRequest(header(), target), kept);
    const fresh = InferRequestSchema.parse(JSON.parse(header().toString()));
    const cases: [string, WireTensorMap, string[]][] = [
      ['mlp', y(1), ['y']],
      ['mlp', y(1), ['y']],
      ['mlp', y(3), ['y']],
      ['other', y(3), ['y']],
      ['other', { y: { dtype: 'int32', shape: [3, 2], data: new Uint8Array(24) } }, ['y']],
      ['other', { ...y(3), z: { dtype: 'uint8', shape: [1], data: new Uint8Array([5]) } }, ['y', 'z']],
      ['other', { ...y(3), z: { dtype: 'uint8', shape: [1], data: new Uint8Array([6]) } }, ['z', 'y']],
      ['other', { ...y(3), z: { dtype: 'string', shape: [1], data: ['s'] } }, ['z', 'y']],
      ['other', { ...y(3), z: { dtype: 'string', shape: [1], data: ['longer'] } }, ['z', 'y']],
    ];
    for (const [name, outputs, order] of cases) {
      const a = encodeInferResponse(name, kept, outputs, order);
      const b = encodeInferResponse(name, fresh, outputs, order);
      assert.deepEqual(a, b, `${name} ${order.join(',')}`);
    }
  });

  test('a response with JSON outputs is written each time', () => {
    const json = Buffer.from('{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","parameters":{"binary_data_size":16}}]}');
    const target = model();
    const kept = checkedInferRequest(json, target);
    assert.equal(checkedInferRequest(json, target), kept);
    const one = encodeInferResponse(
      'mlp',
      kept,
      { y: { dtype: 'float32', shape: [1, 1], data: new Uint8Array(new Float32Array([1]).buffer) } },
      ['y'],
    );
    const two = encodeInferResponse(
      'mlp',
      kept,
      { y: { dtype: 'float32', shape: [1, 1], data: new Uint8Array(new Float32Array([2]).buffer) } },
      ['y'],
    );
    assert.equal(one.body, '{"model_name":"mlp","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[1,1],"data":[1]}]}');
    assert.equal(two.body, '{"model_name":"mlp","model_version":"1","outputs":[{"name":"y","datatype":"FP32","shape":[1,1],"data":[2]}]}');
  });
});
