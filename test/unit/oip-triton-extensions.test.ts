import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { deflateRawSync, deflateSync, gunzipSync, gzipSync, inflateSync } from 'node:zlib';
import {
  MIN_COMPRESSED_BYTES,
  decodeBody,
  encodeBody,
  isEncoded,
  responseCoding,
  responseCodingFor,
  unsupportedCoding,
} from '../../runtime/oip/content-coding.js';
import type { InferTarget } from '../../runtime/oip/infer-backend.js';
import { classCounts, classify, classifyOutputs, printfFixed6 } from '../../runtime/oip/classification.js';
import { InferRequestSchema } from '../../runtime/oip/codec.js';
import { isRawRequest, rawInferRequest } from '../../runtime/oip/raw.js';
import { ModelDeploymentSchema, TroupeError } from '../../runtime/internal.js';
import type { ErrorCode, WireTensor } from '../../runtime/internal.js';

function throwsCode(fn: () => unknown, code: ErrorCode, message: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof TroupeError, String(err));
    assert.equal(err.code, code, err.message);
    assert.match(err.message, message);
    return true;
  });
}

async function rejectsCode(promise: Promise<unknown>, code: ErrorCode, message: RegExp): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof TroupeError, String(err));
    assert.equal(err.code, code, err.message);
    assert.match(err.message, message);
    return true;
  });
}

function wire(
  dtype: WireTensor['dtype'],
  shape: number[],
  values: ArrayLike<number> | ArrayLike<bigint>,
  Ctor: { new (v: never): ArrayBufferView },
): WireTensor {
  const array = new Ctor(Array.from(values as ArrayLike<number>) as never);
  return { dtype, shape, data: new Uint8Array(array.buffer, array.byteOffset, array.byteLength) };
}

describe('classification: scores as C++ std::to_string prints them', () => {
  test('six decimals from the exact binary value, ties to even; signs, zero, inf and nan as glibc prints them', () => {
    // Each expected text is Python's '%f' % x, which rounds as glibc's printf does.
    const cases: [number, string][] = [
      [0.0078125, '0.007812'],
      [0.0234375, '0.023438'],
      [0.01171875, '0.011719'],
      [-0, '-0.000000'],
      [-1e-9, '-0.000000'],
      [0.5, '0.500000'],
      [7.5e-7, '0.000001'],
      [5e-7, '0.000000'],
      [1.5e-6, '0.000002'],
      [1e20, '100000000000000000000.000000'],
      [3.4028234663852886e38, '340282346638528859811704183484516925440.000000'],
      [Math.fround(0.1), '0.100000'],
      [Math.fround(-0.24389278888702393), '-0.243893'],
      [123456.789, '123456.789000'],
      [5e-324, '0.000000'],
    ];
    for (const [x, text] of cases) assert.equal(printfFixed6(x), text, String(x));
    assert.equal(printfFixed6(Infinity), 'inf');
    assert.equal(printfFixed6(-Infinity), '-inf');
    assert.equal(printfFixed6(NaN), 'nan');
    assert.equal(printfFixed6(NaN, true), '-nan');
  });

  test('top k of each batch row, "score:index[:label]", BYTES [batch, k]; ties by lower index, NaN last', () => {
    const logits = wire('float32', [2, 4], [0.25, 0.75, 0.25, -1, NaN, 2, 2, 0.5], Float32Array);
    const out = classify(logits, 3, ['a', 'b', '', 'd'], "output 'y'");
    assert.deepEqual(out, {
      dtype: 'string',
      shape: [2, 3],
      data: ['0.750000:1:b', '0.250000:0:a', '0.250000:2', '2.000000:1:b', '2.000000:2', '0.500000:3:d'],
    });
    // Rank 1 has no batch dimension; k past the class count gives them all.
    assert.deepEqual(classify(wire('float32', [3], [1, 3, 2], Float32Array), 10, undefined, 'o'), {
      dtype: 'string',
      shape: [3],
      data: ['3.000000:1', '2.000000:2', '1.000000:0'],
    });
  });

  test("integer outputs print as integers, 64-bit ones exactly; FP16, BOOL and BYTES are refused in Triton's words", () => {
    assert.deepEqual(classify(wire('int64', [1, 3], [5n, -(2n ** 62n), 2n ** 62n + 1n], BigInt64Array), 2, undefined, 'o').data, [
      '4611686018427387905:2',
      '5:0',
    ]);
    assert.deepEqual(classify(wire('uint8', [1, 3], [7, 255, 0], Uint8Array), 1, undefined, 'o').data, ['255:1']);
    assert.deepEqual(classify(wire('float64', [1, 2], [0.1, 0.2], Float64Array), 1, undefined, 'o').data, ['0.200000:1']);
    throwsCode(
      () => classify(wire('float16', [1, 2], [0, 0], Uint16Array), 1, undefined, "output 'h'"),
      'TROUPE_ERR_BAD_REQUEST',
      /output 'h': class result not available for output due to unsupported type 'FP16'/,
    );
    throwsCode(
      () => classify({ dtype: 'string', shape: [1], data: ['x'] }, 1, undefined, "output 's'"),
      'TROUPE_ERR_BAD_REQUEST',
      /unsupported type 'BYTES'/,
    );
    throwsCode(
      () => classify(wire('bool', [1, 2], [0, 1], Uint8Array), 1, undefined, "output 'b'"),
      'TROUPE_ERR_BAD_REQUEST',
      /unsupported type 'BOOL'/,
    );
  });

  test('the classification parameter: whole numbers only, 0 means none; labels per output or for all', () => {
    const request = (parameters: unknown) => InferRequestSchema.parse({ inputs: [], outputs: [{ name: 'y', parameters }] });
    assert.deepEqual([...classCounts(request({ classification: 3, binary_data: true }))], [['y', 3]]);
    assert.equal(classCounts(request({ classification: 0 })).size, 0);
    assert.equal(classCounts(request({ binary_data: true })).size, 0);
    for (const bad of [-1, 1.5, 'three', true])
      throwsCode(
        () => classCounts(request({ classification: bad })),
        'TROUPE_ERR_BAD_REQUEST',
        /output 'y': parameters\.classification must be a whole number/,
      );
    const outputs = { y: wire('float32', [1, 2], [1, 2], Float32Array), z: wire('float32', [1, 2], [1, 2], Float32Array) };
    const counts = new Map([
      ['y', 1],
      ['z', 1],
    ]);
    const perOutput = classifyOutputs(outputs, counts, { y: ['no', 'yes'] });
    assert.deepEqual([perOutput.y!.data, perOutput.z!.data], [['2.000000:1:yes'], ['2.000000:1']]);
    const shared = classifyOutputs(outputs, counts, ['no', 'yes']);
    assert.deepEqual([shared.y!.data, shared.z!.data], [['2.000000:1:yes'], ['2.000000:1:yes']]);
    assert.equal(classifyOutputs(outputs, new Map(), undefined), outputs);
  });

  test('a deployment spec takes labels as a list or a label file, for every output or per output, and refuses anything else', () => {
    assert.deepEqual(ModelDeploymentSchema.parse({ name: 'm', model: 'm.onnx', labels: ['a', 'b'] }).labels, ['a', 'b']);
    assert.deepEqual(ModelDeploymentSchema.parse({ name: 'm', model: 'm.onnx', labels: { y: ['a'] } }).labels, { y: ['a'] });
    assert.equal(ModelDeploymentSchema.parse({ name: 'm', model: 'm.onnx', labels: 'labels.txt' }).labels, 'labels.txt');
    assert.deepEqual(ModelDeploymentSchema.parse({ name: 'm', model: 'm.onnx', labels: { y: 'y.txt' } }).labels, { y: 'y.txt' });
    for (const labels of ['../a.txt', [1, 2], { y: 1 }, { y: '/etc/passwd' }])
      assert.equal(ModelDeploymentSchema.safeParse({ name: 'm', model: 'm.onnx', labels }).success, false, JSON.stringify(labels));
  });
});

describe('content codings of inference bodies', () => {
  test('gzip and deflate (zlib or gzip streams, as Triton inflates either) decode; identity and none pass through', async () => {
    const body = Buffer.from('{"inputs": []}');
    assert.equal(await decodeBody(body, {}, 1024), body);
    assert.equal(await decodeBody(body, { 'content-encoding': 'identity' }, 1024), body);
    for (const coding of ['gzip', 'deflate', 'GZIP', ' x-gzip ']) {
      for (const packed of [gzipSync(body), deflateSync(body)])
        assert.deepEqual(await decodeBody(packed, { 'content-encoding': coding }, 1024), body, coding);
    }
  });

  test('the size limit applies to the decoded bytes; broken data is a 400; other codings a 415', async () => {
    const bomb = gzipSync(Buffer.alloc(1 << 20));
    await rejectsCode(
      decodeBody(bomb, { 'content-encoding': 'gzip' }, 64 * 1024),
      'TROUPE_ERR_BODY_TOO_LARGE',
      /gzip request body decodes to more than this head accepts/,
    );
    assert.equal((await decodeBody(bomb, { 'content-encoding': 'gzip' }, 1 << 20)).length, 1 << 20);
    await rejectsCode(
      decodeBody(deflateRawSync(Buffer.from('x')), { 'content-encoding': 'deflate' }, 1024),
      'TROUPE_ERR_BAD_REQUEST',
      /not valid deflate data/,
    );
    await rejectsCode(
      decodeBody(Buffer.from('x'), { 'content-encoding': 'br' }, 1024),
      'TROUPE_ERR_UNSUPPORTED_ENCODING',
      /'br' is not supported/,
    );
    assert.equal(unsupportedCoding({ 'content-encoding': 'gzip' }), undefined);
    assert.equal(unsupportedCoding({}), undefined);
    assert.deepEqual(unsupportedCoding({ 'content-encoding': 'gzip, br' })?.status, 415);
  });

  test('Accept-Encoding picks as Triton does: the highest q among gzip, deflate and identity, the first on a tie', async () => {
    const cases: [string | undefined, string | undefined][] = [
      [undefined, undefined],
      ['gzip', 'gzip'],
      ['deflate', 'deflate'],
      ['gzip, deflate', 'gzip'],
      ['deflate;q=0.5, gzip;q=0.8', 'gzip'],
      ['gzip;q=0.2, identity', undefined],
      ['br, *', undefined],
      ['gzip;q=0', undefined],
      ['identity;q=0.1, deflate;q=0.3', 'deflate'],
    ];
    for (const [header, coding] of cases) assert.equal(responseCoding(header), coding, String(header));
    const text = '{"outputs": []}';
    assert.equal(gunzipSync(await encodeBody(text, 'gzip')).toString(), text);
    assert.equal(inflateSync(await encodeBody(Buffer.from(text), 'deflate')).toString(), text);
  });

  test('a response under 1 KiB is sent as it is, whatever Accept-Encoding says', () => {
    assert.equal(responseCodingFor('x'.repeat(MIN_COMPRESSED_BYTES - 1), 'gzip'), undefined);
    const large = Buffer.alloc(MIN_COMPRESSED_BYTES, 7);
    assert.equal(responseCodingFor(large, 'deflate;q=1, gzip;q=0.5'), 'deflate');
    assert.equal(responseCodingFor(large, undefined), undefined);
    assert.equal(isEncoded({}), false);
    assert.equal(isEncoded({ 'content-encoding': 'identity' }), false);
    assert.equal(isEncoded({ 'content-encoding': 'gzip' }), true);
  });
});

describe('raw binary requests', () => {
  const target = (inputs: { name: string; dtype: string; shape: (number | string)[] }[]): InferTarget => ({
    name: 'm',
    kind: 'model',
    metadata: { inputs, outputs: [{ name: 'y', dtype: 'float32', shape: [-1, 2] }] },
  });

  test('only a header of exactly 0 makes a request raw', () => {
    assert.equal(isRawRequest('0'), true);
    assert.equal(isRawRequest(' 0 '), true);
    for (const h of [undefined, '', '10', '00x', ['0', '0']]) assert.equal(isRawRequest(h), false, String(h));
  });

  test("the one input gets the model's dtype and shape, its variable dimension from the byte length; every output binary", () => {
    const body = Buffer.from(new Float32Array([1, 2, 3, 4, 5, 6]).buffer);
    const { request, inputs } = rawInferRequest(target([{ name: 'x', dtype: 'float32', shape: ['batch', 3] }]), body);
    assert.deepEqual(inputs.x!.shape, [2, 3]);
    assert.equal(inputs.x!.dtype, 'float32');
    assert.equal(inputs.x!.data, body);
    assert.deepEqual(request.parameters, { binary_data_output: true });
    assert.deepEqual(rawInferRequest(target([{ name: 'x', dtype: 'int64', shape: [2, 1] }]), Buffer.alloc(16)).inputs.x!.shape, [2, 1]);
    assert.deepEqual(rawInferRequest(target([{ name: 's', dtype: 'string', shape: [1] }]), Buffer.from('héllo')).inputs.s, {
      dtype: 'string',
      shape: [1],
      data: ['héllo'],
    });
  });

  test('what cannot be deduced is refused, naming why', () => {
    throwsCode(
      () =>
        rawInferRequest(
          target([
            { name: 'a', dtype: 'float32', shape: [-1, 2] },
            { name: 'b', dtype: 'float32', shape: [-1, 2] },
          ]),
          Buffer.alloc(8),
        ),
      'TROUPE_ERR_BAD_REQUEST',
      /exactly one input to deduce it, it has 2 \('a', 'b'\)/,
    );
    throwsCode(
      () => rawInferRequest(target([{ name: 'x', dtype: 'float32', shape: [-1, 'n'] }]), Buffer.alloc(8)),
      'TROUPE_ERR_BAD_REQUEST',
      /shape \[-1, -1\] has 2 variable dimensions/,
    );
    throwsCode(
      () => rawInferRequest(target([{ name: 'x', dtype: 'float32', shape: [-1, 3] }]), Buffer.alloc(8)),
      'TROUPE_ERR_BAD_REQUEST',
      /8 bytes are not a whole number of FP32 \[-1, 3\] slices \(12 bytes each\)/,
    );
    throwsCode(
      () => rawInferRequest(target([{ name: 'x', dtype: 'float32', shape: [2, 3] }]), Buffer.alloc(8)),
      'TROUPE_ERR_BAD_TENSOR',
      /raw input 'x'/,
    );
    throwsCode(
      () => rawInferRequest(target([{ name: 's', dtype: 'string', shape: [2] }]), Buffer.alloc(8)),
      'TROUPE_ERR_BAD_REQUEST',
      /a raw BYTES body is one element/,
    );
    throwsCode(
      () => rawInferRequest({ name: 'm', kind: 'model', metadata: null }, Buffer.alloc(8)),
      'TROUPE_ERR_NOT_READY',
      /needs the model's signature/,
    );
    throwsCode(
      () => rawInferRequest(target([{ name: 'x', dtype: 'uint8', shape: [-1] }]), Buffer.alloc(16 * 2 ** 20 + 1)),
      'TROUPE_ERR_TOO_MANY_ELEMENTS',
      /raw input 'x' has 16777217 elements \(at most 16777216/,
    );
  });
});
