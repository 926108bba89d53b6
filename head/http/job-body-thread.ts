import { parentPort } from 'node:worker_threads';
import { checkedBy, decodeInferRequest, InferRequestSchema, parseJson, splitInferBody, toWireError } from '../../runtime/internal.js';
import type { JobBodyAsk, JobBodyAnswer } from './job-body.js';

/**
 * The thread that parses job bodies for the head (job-body.ts): the JSON parse of a large body
 * allocates millions of objects and takes seconds, none of it on the head's event loop.
 */
parentPort!.on('message', ({ id, bytes, headerLength }: JobBodyAsk) => {
  let answer: JobBodyAnswer;
  const transfer: ArrayBuffer[] = [];
  try {
    const { json, binary } = splitInferBody(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), headerLength);
    const body = checkedBy(InferRequestSchema, parseJson(json.toString('utf8'), 'the job request'), 'job request');
    const decoded = decodeInferRequest(body, binary);
    // The inputs' JSON data stays here: the head needs only the tensors decoded from it.
    const inputs = body.inputs.map(({ data: _data, ...head }) => ({ ...head, data: [] }));
    answer = { id, body: { ...body, inputs }, decoded };
    // Large tensors move to the head instead of being copied (small ones may share Node's pool, which must stay here).
    for (const t of Object.values(decoded.inputs)) {
      const data = t.data as unknown;
      if (data instanceof Uint8Array && data.buffer.byteLength >= 1 << 16 && !transfer.includes(data.buffer as ArrayBuffer))
        transfer.push(data.buffer as ArrayBuffer);
    }
  } catch (err) {
    answer = { id, error: toWireError(err) };
  }
  parentPort!.postMessage(answer, transfer);
});
