import { TroupeError } from '../errors.js';
import { byteLengthOf } from '../tensor/dtypes.js';
import { checkWire } from '../tensor/wire.js';
import type { WireTensorMap } from '../tensor/wire.js';
import { takesAnything } from './infer-backend.js';
import type { InferTarget } from './infer-backend.js';
import type { InferRequest } from './codec.js';
import { datatypeOfDtype, oipDtype, oipShape } from './datatypes.js';
import { MAX_REQUEST_ELEMENTS, tooMany } from './json-scan.js';

/**
 * Triton's raw binary request: `Inference-Header-Content-Length: 0` says the body has no JSON
 * header at all and is, whole, the bytes of the model's one input. Its datatype comes from the
 * model; its shape from the model's too, with the one variable dimension (the batch, for our
 * models) worked out from the byte length. Every output comes back binary, as Triton answers
 * such a request (its default output kind becomes binary).
 */

/** What a raw request asks of the response: every output, as binary data. */
const RAW_REQUEST: InferRequest = { inputs: [], parameters: { binary_data_output: true } };

/** Whether the request is raw: the header is present and says 0. */
export function isRawRequest(headerLength: string | string[] | undefined): boolean {
  return typeof headerLength === 'string' && headerLength.trim() === '0';
}

/** The request a raw body stands for, as if its JSON had been sent, and the input it carries. */
export function rawInferRequest(target: InferTarget, body: Buffer): { request: InferRequest; inputs: WireTensorMap } {
  const why = `a raw binary request (Inference-Header-Content-Length: 0) to '${target.name}'`;
  if (!target.metadata)
    throw new TroupeError('TROUPE_ERR_NOT_READY', `${why} needs the model's signature, and no replica of it is READY yet`);
  if (takesAnything(target))
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `${why}: the deployment declares no inputs, so the body's tensor cannot be deduced; send a JSON header`,
    );
  const declared = target.metadata.inputs;
  if (declared.length !== 1) {
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `${why}: the model must have exactly one input to deduce it, it has ${declared.length} (${declared.map((i) => `'${i.name}'`).join(', ')}); send a JSON header`,
    );
  }
  const input = declared[0]!;
  const label = `raw input '${input.name}'`;
  const shown = `[${oipShape(input.shape).join(', ')}]`;
  const dtype = oipDtype(input.dtype as Parameters<typeof oipDtype>[0], label);
  const variable = input.shape.map((d, i) => (typeof d === 'number' && d >= 0 ? -1 : i)).filter((i) => i >= 0);
  if (variable.length > 1)
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `${label}: its shape ${shown} has ${variable.length} variable dimensions; a raw body can fill only one`,
    );
  const shape = input.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : 1));
  if (dtype === 'string') {
    // Triton: a BYTES raw input is one element, the whole body (given a length prefix inside).
    if (shape.some((d) => d !== 1))
      throw new TroupeError(
        'TROUPE_ERR_BAD_REQUEST',
        `${label}: a raw BYTES body is one element, and the input's shape ${shown} holds more`,
      );
    return { request: RAW_REQUEST, inputs: { [input.name]: { dtype, shape, data: [body.toString('utf8')] } } };
  }
  // The variable dimension is 1 in `shape` here, so this is the bytes of one slice along it.
  const rowBytes = byteLengthOf(
    dtype,
    shape.reduce((a, b) => a * b, 1),
  );
  if (variable.length === 1) {
    if (rowBytes === 0 || body.length % rowBytes !== 0) {
      throw new TroupeError(
        'TROUPE_ERR_BAD_REQUEST',
        `${label}: the body's ${body.length} bytes are not a whole number of ${datatypeOfDtype(dtype)} ${shown} slices (${rowBytes} bytes each)`,
      );
    }
    shape[variable[0]!] = body.length / rowBytes;
  }
  const count = shape.reduce((a, b) => a * b, 1);
  // The JSON path's bound holds here too (a 64 MiB body of UINT8 is 64M elements).
  if (count > MAX_REQUEST_ELEMENTS) throw tooMany(`${label} has ${count} elements`, MAX_REQUEST_ELEMENTS);
  const wire = { dtype, shape, data: body };
  checkWire(wire, label);
  return { request: RAW_REQUEST, inputs: { [input.name]: wire } };
}
