import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fromHalfBits, toHalfBits } from '../../runtime/oip/float16.js';
import { BinaryReader, binaryBody, decodeBytesElements, encodeBytesElements, splitInferBody } from '../../runtime/oip/binary.js';
import { InferRequestSchema, decodeInferRequest, encodeInferResponse, wantsBinary } from '../../runtime/oip/codec.js';
import { OIP_DATATYPES, datatypeOfDtype, dtypeOfDatatype, oipShape } from '../../runtime/oip/datatypes.js';
import { flattenData, jsonTextOfWire, wireFromJson } from '../../runtime/oip/json.js';
import { TroupeError, fromWire, toWire, tensor } from '../../runtime/internal.js';
import type { ErrorCode, WireTensor } from '../../runtime/internal.js';

function throwsCode(fn: () => unknown, code: ErrorCode, message: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof TroupeError, String(err));
    assert.equal(err.code, code, err.message);
    assert.match(err.message, message);
    return true;
  });
}

const f32 = (values: number[]) => new Float32Array(values);

describe('OIP datatypes', () => {
  test('every OIP datatype maps to a dtype and back; names are case-sensitive', () => {
    for (const name of OIP_DATATYPES) assert.equal(datatypeOfDtype(dtypeOfDatatype(name, 'x')), name);
    assert.equal(dtypeOfDatatype('BYTES', 'x'), 'string');
    assert.equal(dtypeOfDatatype('FP32', 'x'), 'float32');
    throwsCode(
      () => dtypeOfDatatype('fp32', "input 'x'"),
      'TROUPE_ERR_BAD_TENSOR',
      /input 'x': unknown datatype 'fp32' \(use one of BOOL, .*FP32/,
    );
    throwsCode(() => dtypeOfDatatype('FLOAT32', "input 'x'"), 'TROUPE_ERR_BAD_TENSOR', /unknown datatype 'FLOAT32'/);
  });

  test('symbolic and negative dims are -1', () => {
    assert.deepEqual(oipShape(['N', 64, -1, 3]), [-1, 64, -1, 3]);
  });
});

describe('FP16', () => {
  test('round trips every finite half exactly, and rounds to nearest even', () => {
    for (let bits = 0; bits < 0x10000; bits++) {
      if ((bits & 0x7c00) === 0x7c00) continue;
      assert.equal(toHalfBits(fromHalfBits(bits)), bits === 0x8000 ? 0x8000 : bits);
    }
    assert.equal(toHalfBits(1), 0x3c00);
    assert.equal(toHalfBits(-2), 0xc000);
    assert.equal(toHalfBits(65520), 0x7c00, 'overflow is Infinity');
    assert.equal(toHalfBits(1 + 2 ** -11), 0x3c00, 'a tie goes to even');
    assert.ok(Number.isNaN(fromHalfBits(toHalfBits(Number.NaN))));
  });
});

describe('JSON tensor data', () => {
  test('nested and flat data give the same bytes, row-major', () => {
    const nested = wireFromJson(
      'float32',
      [2, 2],
      [
        [1, 2],
        [3, 4],
      ],
      "input 'x'",
    );
    const flat = wireFromJson('float32', [2, 2], [1, 2, 3, 4], "input 'x'");
    assert.deepEqual(nested, flat);
    assert.deepEqual([...new Float32Array((flat.data as Uint8Array).slice().buffer)], [1, 2, 3, 4]);
  });

  test('element count must match the shape', () => {
    throwsCode(
      () => wireFromJson('float32', [1, 64], [1, 2], "input 'x'"),
      'TROUPE_ERR_BAD_TENSOR',
      /input 'x': shape \[1,64\] holds 64 elements, "data" has 2/,
    );
    throwsCode(() => flattenData([1, 2, 3], 2, "input 'x'", '[2]'), 'TROUPE_ERR_BAD_TENSOR', /holds 2 elements, "data" has more than 2/);
    throwsCode(() => flattenData('abc', 2, "input 'x'", '[2]'), 'TROUPE_ERR_BAD_TENSOR', /"data" must be an array/);
  });

  test('each element is checked against the datatype', () => {
    throwsCode(
      () => wireFromJson('float32', [2], [1, 'a'], "input 'x'"),
      'TROUPE_ERR_BAD_TENSOR',
      /data\[1\] is "a", expected a number for datatype FP32/,
    );
    throwsCode(
      () => wireFromJson('uint8', [1], [256], "input 'x'"),
      'TROUPE_ERR_BAD_TENSOR',
      /expected an integer in \[0, 255\] for datatype UINT8/,
    );
    throwsCode(() => wireFromJson('int32', [1], [1.5], "input 'x'"), 'TROUPE_ERR_BAD_TENSOR', /INT32/);
    throwsCode(() => wireFromJson('bool', [1], [1], "input 'x'"), 'TROUPE_ERR_BAD_TENSOR', /expected true or false/);
    throwsCode(() => wireFromJson('int64', [1], [2 ** 60], "input 'x'"), 'TROUPE_ERR_BAD_TENSOR', /send larger values as binary data/);
    throwsCode(() => wireFromJson('string', [1], [3], "input 'x'"), 'TROUPE_ERR_BAD_TENSOR', /expected a string for datatype BYTES/);
    // JSON has no infinity: a number past the datatype's range is refused, not stored as one (1e400 parses as Infinity).
    throwsCode(
      () => wireFromJson('float32', [2], [1, JSON.parse('1e400') as number], "input 'x'"),
      'TROUPE_ERR_BAD_TENSOR',
      /^input 'x': data\[1\] is Infinity, expected a number within ±3\.4028235e38 for datatype FP32$/,
    );
    throwsCode(() => wireFromJson('float32', [1], [1e39], "input 'x'"), 'TROUPE_ERR_BAD_TENSOR', /±3\.4028235e38/);
    throwsCode(() => wireFromJson('float64', [1], [-Infinity], "input 'x'"), 'TROUPE_ERR_BAD_TENSOR', /a finite number for datatype FP64/);
    throwsCode(() => wireFromJson('float16', [1], [70000], "input 'x'"), 'TROUPE_ERR_BAD_TENSOR', /±65504 for datatype FP16/);
    assert.equal(wireFromJson('float32', [1], [3.4e38], "input 'x'").shape[0], 1);
    assert.equal(wireFromJson('float16', [1], [65504], "input 'x'").shape[0], 1);
  });

  test('every datatype round trips through JSON', () => {
    const cases: [WireTensor['dtype'], unknown[]][] = [
      ['bool', [true, false, true]],
      ['uint8', [0, 255, 7]],
      ['int8', [-128, 127, 0]],
      ['uint16', [65535, 0, 1]],
      ['int16', [-32768, 32767, 5]],
      ['uint32', [4294967295, 0, 9]],
      ['int32', [-2147483648, 2147483647, 3]],
      ['int64', [-(2 ** 53 - 1), 2 ** 53 - 1, 0]],
      ['uint64', [2 ** 53 - 1, 0, 1]],
      ['float16', [0.5, -2, 65504]],
      ['float32', [0.1, -3.5, 1e-7]],
      ['float64', [0.1, -3.5, 1e300]],
      ['string', ['a', 'héllo', '']],
    ];
    for (const [dtype, values] of cases) {
      const wire = wireFromJson(dtype as never, [3], values, 'x');
      const back = JSON.parse(jsonTextOfWire(wire, 'x')) as unknown[];
      const want = dtype === 'float32' ? values.map((v) => Math.fround(v as number)) : values;
      assert.deepEqual(back, want, dtype);
    }
  });

  test('INT64 outputs keep every digit; non-finite floats become null', () => {
    const big = toWire(tensor('int64', [2], new BigInt64Array([9007199254740993n, -9223372036854775808n])));
    assert.equal(jsonTextOfWire(big, 'y'), '[9007199254740993,-9223372036854775808]');
    assert.equal(jsonTextOfWire(toWire(tensor('float32', [2], f32([Number.NaN, 1]))), 'y'), '[null,1]');
  });
});

describe('binary tensor data', () => {
  test('the header length splits JSON from binary; a length beyond the body is refused', () => {
    const body = Buffer.concat([Buffer.from('{"a":1}'), Buffer.from([1, 2, 3])]);
    const { json, binary } = splitInferBody(body, '7');
    assert.equal(json.toString(), '{"a":1}');
    assert.deepEqual([...binary], [1, 2, 3]);
    assert.equal(splitInferBody(body, undefined).json.length, body.length);
    throwsCode(
      () => splitInferBody(body, '11'),
      'TROUPE_ERR_BAD_REQUEST',
      /Inference-Header-Content-Length is 11 but the body has only 10 bytes/,
    );
    throwsCode(() => splitInferBody(body, 'abc'), 'TROUPE_ERR_BAD_REQUEST', /must be a whole number of bytes, got 'abc'/);
  });

  test('inputs take their binary_data_size in order; short or leftover bytes are refused', () => {
    const reader = new BinaryReader(Buffer.from([1, 2, 3, 4, 5]));
    assert.deepEqual([...reader.take(2, 'a')], [1, 2]);
    throwsCode(() => reader.take(4, "input 'b'"), 'TROUPE_ERR_BAD_REQUEST', /input 'b': binary_data_size is 4 but only 3 bytes/);
    throwsCode(
      () => new BinaryReader(Buffer.alloc(0)).take(4, "input 'b'"),
      'TROUPE_ERR_BAD_REQUEST',
      /no binary data \(is Inference-Header-Content-Length set\?\)/,
    );
    const rest = new BinaryReader(Buffer.from([1, 2, 3]));
    rest.take(1, 'a');
    throwsCode(() => rest.finish(), 'TROUPE_ERR_BAD_REQUEST', /2 bytes of binary data after/);
  });

  test('BYTES elements are length-prefixed (4 bytes, little-endian)', () => {
    const bytes = encodeBytesElements(['ab', '', 'héllo']);
    assert.deepEqual([...bytes.subarray(0, 6)], [2, 0, 0, 0, 97, 98]);
    assert.deepEqual(decodeBytesElements(bytes, 3, 'x'), ['ab', '', 'héllo']);
    throwsCode(() => decodeBytesElements(bytes, 2, "input 's'"), 'TROUPE_ERR_BAD_TENSOR', /holds 2 elements, the binary data has 3/);
    throwsCode(() => decodeBytesElements(bytes.subarray(0, 5), 1, "input 's'"), 'TROUPE_ERR_BAD_TENSOR', /says 2 bytes but 1 are left/);
  });

  test('a response body is the JSON then the binary parts', () => {
    const { body, headerLength } = binaryBody(Buffer.from('{"x":1}'), [new Uint8Array([9, 8])]);
    assert.equal(headerLength, 7);
    assert.deepEqual([...body.subarray(7)], [9, 8]);
  });
});

describe('inference requests and responses', () => {
  const x = f32([1, 2, 3, 4]);
  const xBytes = Buffer.from(x.buffer);

  test('a mixed request: one input as JSON, one as binary, the binary bytes used without a copy', () => {
    const request = InferRequestSchema.parse({
      id: '42',
      inputs: [
        {
          name: 'a',
          shape: [2, 2],
          datatype: 'FP32',
          data: [
            [1, 2],
            [3, 4],
          ],
        },
        { name: 'b', shape: [4], datatype: 'FP32', parameters: { binary_data_size: 16 } },
      ],
      outputs: [{ name: 'y' }],
      parameters: { timeout: 2500 },
    });
    const binary = Buffer.concat([xBytes]);
    const decoded = decodeInferRequest(request, binary);
    assert.deepEqual(decoded.outputs, ['y']);
    assert.equal(decoded.timeoutMs, 2);
    assert.deepEqual([...(fromWire(decoded.inputs.a!, 'a').data as Float32Array)], [1, 2, 3, 4]);
    assert.equal((decoded.inputs.b!.data as Uint8Array).buffer, binary.buffer, 'a view into the body');
  });

  test('bad requests name the input and the problem', () => {
    const parse = (inputs: unknown[], binary = Buffer.alloc(0)) => decodeInferRequest(InferRequestSchema.parse({ inputs }), binary);
    throwsCode(
      () => parse([{ name: 'a', shape: [1], datatype: 'FP32' }]),
      'TROUPE_ERR_BAD_REQUEST',
      /input 'a' has neither "data" nor parameters.binary_data_size/,
    );
    throwsCode(
      () => parse([{ name: 'a', shape: [1], datatype: 'FP32', data: [1], parameters: { binary_data_size: 4 } }]),
      'TROUPE_ERR_BAD_REQUEST',
      /both/,
    );
    throwsCode(
      () => parse([{ name: 'a', shape: [-1], datatype: 'FP32', data: [] }]),
      'TROUPE_ERR_BAD_TENSOR',
      /dims must be integers >= 0/,
    );
    throwsCode(
      () => parse([{ name: 'a', shape: [2], datatype: 'FP32', parameters: { binary_data_size: 4 } }], Buffer.alloc(4)),
      'TROUPE_ERR_BAD_TENSOR',
      /float32\[2\] needs 8 bytes, got 4/,
    );
    throwsCode(
      () => parse([{ name: 'a', shape: [1], datatype: 'FP32', parameters: { binary_data_size: -4 } }]),
      'TROUPE_ERR_BAD_REQUEST',
      /binary_data_size must be a whole number/,
    );
    throwsCode(
      () =>
        parse([
          { name: 'a', shape: [1], datatype: 'FP32', data: [1] },
          { name: 'a', shape: [1], datatype: 'FP32', data: [1] },
        ]),
      'TROUPE_ERR_BAD_INPUT',
      /given twice/,
    );
    assert.equal(
      decodeInferRequest(InferRequestSchema.parse({ inputs: [], parameters: { timeout: 999 } }), Buffer.alloc(0)).timeoutMs,
      0,
      'under a millisecond is already spent',
    );
  });

  test('binary_data on an output overrides binary_data_output on the request', () => {
    const request = InferRequestSchema.parse({
      inputs: [],
      parameters: { binary_data_output: true },
      outputs: [{ name: 'a', parameters: { binary_data: false } }, { name: 'b' }],
    });
    assert.equal(wantsBinary(request, 'a'), false);
    assert.equal(wantsBinary(request, 'b'), true);
    assert.equal(wantsBinary(InferRequestSchema.parse({ inputs: [] }), 'b'), false);
  });

  test('responses: JSON with the id echoed, or JSON then binary parts with the header length', () => {
    const outputs = { y: toWire(tensor('float32', [2, 2], x)), s: toWire(tensor('string', [1], ['hi'])) };
    const json = encodeInferResponse('m', InferRequestSchema.parse({ id: 'r1', inputs: [] }), outputs, ['y', 's']);
    assert.equal(json.headerLength, undefined);
    assert.deepEqual(JSON.parse(json.body as string), {
      model_name: 'm',
      model_version: '1',
      id: 'r1',
      outputs: [
        { name: 'y', datatype: 'FP32', shape: [2, 2], data: [1, 2, 3, 4] },
        { name: 's', datatype: 'BYTES', shape: [1], data: ['hi'] },
      ],
    });
    const binary = encodeInferResponse('m', InferRequestSchema.parse({ inputs: [], parameters: { binary_data_output: true } }), outputs, [
      'y',
      's',
    ]);
    assert.equal(binary.contentType, 'application/octet-stream');
    const body = binary.body as Buffer;
    const head = JSON.parse(body.subarray(0, binary.headerLength).toString()) as {
      outputs: { parameters: { binary_data_size: number } }[];
    };
    assert.equal('id' in head, false, 'no id when the request had none');
    assert.deepEqual(
      head.outputs.map((o) => o.parameters.binary_data_size),
      [16, 6],
    );
    assert.deepEqual(body.subarray(binary.headerLength!, binary.headerLength! + 16), xBytes);
    assert.deepEqual(decodeBytesElements(body.subarray(binary.headerLength! + 16), 1, 's'), ['hi']);
  });
});
