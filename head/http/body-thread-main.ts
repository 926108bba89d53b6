import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import {
  checkedBy,
  decodeInferRequest,
  generateInputs,
  GenerateRequestSchema,
  generateValues,
  InferRequestSchema,
  parseJson,
  runInBackground,
  splitInferBody,
  toWireError,
} from '../../runtime/internal.js';
import type { WireTensorMap } from '../../runtime/internal.js';
import { checkMethodArgs } from '../calls/actor-calls.js';
import { BODY_THREAD_NICE } from './body-thread.js';
import type { BodyAnswer, BodyAsk, BodyKinds } from './body-thread.js';
import { readCallBody } from './call-body.js';

/**
 * The thread that parses request bodies for the head (body-thread.ts): the JSON parse of a large
 * body allocates millions of objects and takes seconds, none of it on the head's event loop.
 */

// Below the head's event loop for the CPU (on Linux, a priority given to pid 0 is this thread's
// alone): where the cores are busy, bodies wait and /healthz, placements and agents' messages go first.
try {
  setPriority(BODY_THREAD_NICE);
} catch {
  // Not permitted here (some container runtimes): the thread keeps the head's priority.
}

/** Tensors' buffers to move to the head instead of copying (small ones may share Node's pool, which must stay here). */
function movable(tensors: WireTensorMap, into: ArrayBuffer[]): void {
  for (const t of Object.values(tensors)) {
    const data = t.data as unknown;
    if (data instanceof Uint8Array && data.buffer.byteLength >= 1 << 16 && !into.includes(data.buffer as ArrayBuffer))
      into.push(data.buffer as ArrayBuffer);
  }
}

function job(ask: Extract<BodyAsk, { kind: 'job' }>, transfer: ArrayBuffer[]): BodyKinds['job']['answer'] {
  const { json, binary } = splitInferBody(Buffer.from(ask.bytes.buffer, ask.bytes.byteOffset, ask.bytes.byteLength), ask.headerLength);
  const body = checkedBy(InferRequestSchema, parseJson(json.toString('utf8'), 'the job request'), 'job request');
  const decoded = decodeInferRequest(body, binary);
  movable(decoded.inputs, transfer);
  // The inputs' JSON data stays here: the head needs only the tensors decoded from it.
  const inputs = body.inputs.map(({ data: _data, ...head }) => ({ ...head, data: [] }));
  return { body: { ...body, inputs }, decoded };
}

function generate(ask: Extract<BodyAsk, { kind: 'generate' }>, transfer: ArrayBuffer[]): BodyKinds['generate']['answer'] {
  const text = Buffer.from(ask.bytes.buffer, ask.bytes.byteOffset, ask.bytes.byteLength).toString('utf8');
  const body = checkedBy(GenerateRequestSchema, parseJson(text, 'the generate request'), 'generate request');
  // A class actor's values are bounded here (depth, size), as the call would bound them: a value
  // nested 10,000 deep must be refused by name, not overflow the stack that copies it to the head.
  if (!ask.inputs) {
    checkMethodArgs(ask.target, 'generate', [generateValues(body), body.parameters ?? {}]);
    return { body };
  }
  const tensors = generateInputs(body, ask.inputs, ask.target);
  movable(tensors, transfer);
  // The JSON values stay here: the head needs only the tensors converted from them.
  return {
    body: { ...(body.id !== undefined ? { id: body.id } : {}), ...(body.parameters ? { parameters: body.parameters } : {}) },
    tensors,
  };
}

runInBackground();

parentPort!.on('message', (ask: BodyAsk) => {
  let message: BodyAnswer;
  const transfer: ArrayBuffer[] = [];
  try {
    const answer =
      ask.kind === 'job'
        ? job(ask, transfer)
        : ask.kind === 'generate'
          ? generate(ask, transfer)
          : readCallBody(Buffer.from(ask.bytes.buffer, ask.bytes.byteOffset, ask.bytes.byteLength).toString('utf8'), ask.actor, ask.method);
    message = { id: ask.id, answer };
  } catch (err) {
    message = { id: ask.id, error: toWireError(err) };
  }
  try {
    parentPort!.postMessage(message, transfer);
  } catch (err) {
    // What cannot be copied to the head fails its request, not this thread (and the others it holds).
    parentPort!.postMessage({ id: ask.id, error: toWireError(err) } satisfies BodyAnswer);
  }
});
