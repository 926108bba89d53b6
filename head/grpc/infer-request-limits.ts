import { TroupeError } from '../../runtime/internal.js';
import { checkDecoded } from './malformed.js';
import type { InferParameter, ModelInferRequest } from './messages.js';

/**
 * The bounds of a decoded ModelInferRequest (name lengths, counts, ranks: the HTTP schema's,
 * runtime/oip/codec.ts), checked with plain loops over the few fields that have them instead of
 * a schema's walk of every field, on the path every inference takes. A request past one is
 * TROUPE_ERR_BAD_REQUEST naming the field, in the words the other messages' schemas use.
 */

const MAX_NAME = 256;
const MAX_VERSION = 64;
const MAX_DATATYPE = 64;
const MAX_STRING_PARAMETER = 4096;
const MAX_TENSORS = 1024;
const MAX_DIMS = 16;

function invalid(path: string, why: string): never {
  throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `the ModelInferRequest is invalid at '${path}': ${why}`);
}

function text(value: string, max: number, path: string, min = 0): void {
  if (value.length > max) invalid(path, `Too big: expected string to have <=${max} characters`);
  if (value.length < min) invalid(path, `Too small: expected string to have >=${min} characters`);
}

function count(list: readonly unknown[], max: number, path: string): void {
  if (list.length > max) invalid(path, `Too big: expected array to have <=${max} items`);
}

function parameters(map: Record<string, InferParameter>, path: string): void {
  for (const key in map) {
    text(key, MAX_NAME, path);
    const p = map[key]!;
    if (p.string_param !== undefined) text(p.string_param, MAX_STRING_PARAMETER, `${path}.${key}.string_param`);
  }
}

/** The request a codec decoded, checked; TROUPE_ERR_BAD_REQUEST for bytes that were no protobuf or a field past its bound. */
export function checkModelInferRequest(message: unknown): ModelInferRequest {
  checkDecoded(message);
  const request = message as ModelInferRequest;
  text(request.model_name, MAX_NAME, 'model_name');
  text(request.model_version, MAX_VERSION, 'model_version');
  text(request.id, MAX_NAME, 'id');
  parameters(request.parameters, 'parameters');
  count(request.inputs, MAX_TENSORS, 'inputs');
  request.inputs.forEach((input, i) => {
    text(input.name, MAX_NAME, `inputs.${i}.name`, 1);
    text(input.datatype, MAX_DATATYPE, `inputs.${i}.datatype`);
    count(input.shape, MAX_DIMS, `inputs.${i}.shape`);
    parameters(input.parameters, `inputs.${i}.parameters`);
  });
  count(request.outputs, MAX_TENSORS, 'outputs');
  request.outputs.forEach((output, i) => {
    text(output.name, MAX_NAME, `outputs.${i}.name`, 1);
    parameters(output.parameters, `outputs.${i}.parameters`);
  });
  count(request.raw_input_contents, MAX_TENSORS, 'raw_input_contents');
  return request;
}
