import assert from 'node:assert/strict';
import { loadPackageDefinition } from '@grpc/grpc-js';
import type { GrpcObject, ServiceDefinition } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { describe, test } from 'node:test';
import { decodeModelInferRequest } from '../../head/grpc/infer-request-codec.js';
import { encodeModelInferResponse, encodeModelStreamInferResponse } from '../../head/grpc/infer-response-codec.js';
import { ProtobufError } from '../../head/grpc/protobuf-reader.js';
import { LOADER_OPTIONS } from '../../head/grpc/service-definition.js';
import { Prng, mutateBytes } from '../helpers/fuzz.js';
import { PROTO_DIR } from '../helpers/grpc-client.js';

/**
 * The head's own ModelInfer codec against protobufjs (what @grpc/proto-loader builds from the same
 * .proto, and what clients use): requests a client encodes decode to what proto-loader decodes
 * them to; responses the head encodes decode, in a client, to what was meant; bytes that are not a
 * protobuf throw a ProtobufError, never anything else.
 */

const inference = loadPackageDefinition(loadSync('grpc_service.proto', { ...LOADER_OPTIONS, includeDirs: [PROTO_DIR] }))
  .inference as GrpcObject;
const reference = (inference.GRPCInferenceService as unknown as { service: ServiceDefinition }).service;
const encodeRequest = (message: unknown) => reference.ModelInfer!.requestSerialize(message);
const decodeReference = (bytes: Buffer) => reference.ModelInfer!.requestDeserialize(bytes) as Record<string, unknown>;

/** proto-loader's object in the codec's shape: shapes as numbers, maps as plain objects, bytes as Uint8Array. */
function normalized(value: unknown, key = ''): unknown {
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return [...value];
  if (Array.isArray(value)) return key === 'shape' ? value.map(Number) : value.map((v) => normalized(v));
  if (value && typeof value === 'object')
    return Object.fromEntries(
      Object.entries(value)
        .map(([k, v]) => [k, normalized(v, k)])
        .sort(([a], [b]) => String(a).localeCompare(String(b))),
    );
  return value;
}

const REQUESTS: Record<string, unknown>[] = [
  {},
  {
    model_name: 'mlp',
    model_version: '1',
    id: 'req-1',
    parameters: {
      timeout: { int64_param: '250000' },
      big: { uint64_param: '18446744073709551615' },
      negative: { int64_param: '-9223372036854775808' },
      flag: { bool_param: true },
      ratio: { double_param: 0.25 },
      text: { string_param: 'héllo' },
      __proto__: { string_param: 'a key like any other' },
    },
    inputs: [{ name: 'x', datatype: 'FP32', shape: ['1', '64'], parameters: { binary_data_size: { int64_param: '256' } } }],
    outputs: [{ name: 'y', parameters: { classification: { int64_param: '3' } } }, { name: 'z' }],
    raw_input_contents: [Buffer.from(new Float32Array(64).fill(1.5).buffer)],
  },
  {
    model_name: 'typed',
    inputs: [
      { name: 'f', datatype: 'FP32', shape: ['3'], contents: { fp32_contents: [1.5, -0, Infinity] } },
      { name: 'd', datatype: 'FP64', shape: ['2'], contents: { fp64_contents: [Math.PI, -1e300] } },
      { name: 'i', datatype: 'INT32', shape: ['4'], contents: { int_contents: [0, -1, 2147483647, -2147483648] } },
      { name: 'u', datatype: 'UINT32', shape: ['2'], contents: { uint_contents: [0, 4294967295] } },
      { name: 'l', datatype: 'INT64', shape: ['3'], contents: { int64_contents: ['-9223372036854775808', '9223372036854775807', '-1'] } },
      { name: 'ul', datatype: 'UINT64', shape: ['1'], contents: { uint64_contents: ['18446744073709551615'] } },
      { name: 'b', datatype: 'BOOL', shape: ['3'], contents: { bool_contents: [true, false, true] } },
      { name: 's', datatype: 'BYTES', shape: ['2'], contents: { bytes_contents: [Buffer.from('ab'), Buffer.alloc(0)] } },
      { name: 'neg', datatype: 'FP32', shape: ['-1', '9007199254740991', '0'] },
    ],
  },
];

describe('the ModelInfer codec', () => {
  test('requests decode as proto-loader decodes them', () => {
    for (const request of REQUESTS) {
      const bytes = encodeRequest(request);
      // The reference first: the codec may move raw contents within the message (to align them).
      const expected = normalized(decodeReference(bytes));
      assert.deepEqual(normalized(decodeModelInferRequest(bytes)), expected, JSON.stringify(request));
    }
  });

  test('repeated scalars decode packed and unpacked alike; unknown fields are passed over', () => {
    // inputs { name: "x" shape: 2 shape: 3 (unpacked) contents { int_contents: 7 (unpacked) } } field 99 (varint), field 7 bytes.
    const unpacked = Buffer.from([
      0x2a, 0x0b, 0x0a, 0x01, 0x78, 0x18, 0x02, 0x18, 0x03, 0x2a, 0x02, 0x10, 0x07, 0x98, 0x06, 0x05, 0x3a, 0x01, 0xff,
    ]);
    const decoded = decodeModelInferRequest(unpacked);
    assert.deepEqual(decoded.inputs[0]!.shape, [2, 3]);
    assert.deepEqual(decoded.inputs[0]!.contents?.int_contents, [7]);
    assert.deepEqual([...decoded.raw_input_contents[0]!], [0xff]);
  });

  test('raw_input_contents are slices of the received message, not copies, moved in place to be aligned', () => {
    for (const request of [REQUESTS[1]!, { ...REQUESTS[1]!, id: 'x' }, { ...REQUESTS[1]!, id: 'xy' }, { ...REQUESTS[1]!, id: 'xyz' }]) {
      const encoded = encodeRequest(request);
      for (let offset = 0; offset < 8; offset++) {
        // At every alignment of the message in its buffer, as grpc-js hands it over (after a 5-byte prefix).
        const bytes = Buffer.alloc(encoded.length + offset);
        encoded.copy(bytes, offset);
        const message = bytes.subarray(offset);
        const decoded = decodeModelInferRequest(message);
        const raw = decoded.raw_input_contents[0]!;
        assert.equal(raw.buffer, bytes.buffer);
        assert.equal(raw.byteOffset % 4, 0, `aligned (message at offset ${offset})`);
        assert.deepEqual(new Float32Array(raw.buffer, raw.byteOffset, 64), new Float32Array(64).fill(1.5));
        assert.deepEqual(normalized(decoded), normalized(decodeReference(encoded)));
      }
    }
  });

  test('bytes that are no ModelInferRequest throw a ProtobufError, and only that', () => {
    const r = new Prng(7);
    const valid = encodeRequest(REQUESTS[2]);
    let refused = 0;
    for (let i = 0; i < 3000; i++) {
      const bytes = i % 3 === 0 ? Buffer.from(r.bytes(r.int(100))) : mutateBytes(r, valid);
      try {
        decodeModelInferRequest(bytes);
      } catch (err) {
        assert.ok(err instanceof ProtobufError, String(err));
        refused++;
      }
    }
    assert.ok(refused > 500, `most are refused (${refused})`);
    assert.throws(() => decodeModelInferRequest(valid.subarray(0, valid.length - 3)), ProtobufError);
  });

  test('responses decode, in a client, to what the head meant', () => {
    const raw = Buffer.from(new Float32Array([1, 2, 3]).buffer);
    const response = {
      model_name: 'mlp',
      model_version: '1',
      id: 'req-1',
      outputs: [
        { name: 'y', datatype: 'FP32', shape: [1, 3] },
        {
          name: 't',
          datatype: 'INT64',
          shape: [2],
          contents: {
            int64_contents: ['-9223372036854775808', '5'],
            int_contents: [-5, 7],
            uint_contents: [4294967295],
            uint64_contents: ['18446744073709551615'],
            bool_contents: [true, false],
            fp32_contents: [0.5],
            fp64_contents: [Math.E],
            bytes_contents: [Buffer.from('x')],
          },
        },
      ],
      raw_output_contents: [raw],
    };
    const decoded = reference.ModelInfer!.responseDeserialize(encodeModelInferResponse(response));
    assert.deepEqual(
      normalized(decoded),
      normalized({ ...response, parameters: {}, outputs: response.outputs.map((o) => ({ contents: null, parameters: {}, ...o })) }),
    );

    const answer = reference.ModelStreamInfer!.responseDeserialize(
      encodeModelStreamInferResponse({ error_message: 'TROUPE_ERR_X: no', infer_response: { model_name: 'm', id: '7' } }),
    ) as { error_message: string; infer_response: { model_name: string; id: string; outputs: unknown[] } };
    assert.equal(answer.error_message, 'TROUPE_ERR_X: no');
    assert.equal(answer.infer_response.model_name, 'm');
    assert.equal(answer.infer_response.id, '7');
    assert.deepEqual(answer.infer_response.outputs, []);
  });
});
