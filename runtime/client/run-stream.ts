import { TroupeError } from '../errors.js';
import { newId } from '../ids.js';
import type { ClientToHead } from '../protocol/client.js';
import { MAX_STREAM_WINDOW } from '../protocol/method-call.js';
import { WireTensorMapSchema, mapFromWire, mapToWire } from '../tensor/wire.js';
import type { Tensor } from '../tensor/tensor.js';
import { ActorStream, DEFAULT_STREAM_WINDOW } from './actor-stream.js';
import type { StreamRegistry } from './actor-stream.js';
import type { HeadConnection } from './connection.js';
import type { Outputs } from './future.js';
import { asTensor } from './run-input.js';

export interface StreamRunOptions {
  /** Items the run may be ahead of the reader (default 16, at most 1024). */
  window?: number;
  /** Return only these outputs of each item. */
  outputs?: string[];
  /** Bounds the steps that are not streams (a model step, a plain method); the stream itself is paced by its reader. */
  timeoutMs?: number;
}

type RunStreamMessage = Extract<ClientToHead, { type: 'runStream' }>;

/**
 * Opens a run read as a stream through the head (Cluster.stream): the message goes out now,
 * items arrive as `streamItem` pushes into the returned stream, and its credit and cancel go back
 * as the SDK's actor streams' do.
 */
export function openRunStream(
  conn: HeadConnection,
  streams: StreamRegistry,
  deployment: string,
  inputs: Record<string, Tensor>,
  options: StreamRunOptions,
): ActorStream<Outputs> {
  const window = options.window ?? DEFAULT_STREAM_WINDOW;
  if (!Number.isInteger(window) || window < 1 || window > MAX_STREAM_WINDOW)
    throw new TroupeError('TROUPE_ERR_BAD_INPUT', `stream window must be a whole number in [1, ${MAX_STREAM_WINDOW}], got ${window}`);
  const tensors: Record<string, Tensor> = {};
  for (const [name, value] of Object.entries(inputs)) tensors[name] = asTensor(name, value);
  const message: RunStreamMessage = { type: 'runStream', id: newId(), deployment, inputs: mapToWire(tensors), credit: window };
  if (options.outputs) message.outputs = options.outputs;
  if (options.timeoutMs !== undefined) message.timeoutMs = options.timeoutMs;
  const id = message.id;
  const stream = new ActorStream<Outputs>(
    id,
    window,
    {
      grant: (n) => void conn.request({ type: 'streamCredit', stream: id, n }, 30_000).catch(() => {}),
      cancel: () => void conn.request({ type: 'streamCancel', stream: id }, 30_000).catch(() => {}),
    },
    (value) => {
      const wire = WireTensorMapSchema.safeParse(value);
      if (!wire.success) throw new TroupeError('TROUPE_ERR_BAD_MESSAGE', `an item of stream ${id} is not a map of tensors`);
      return mapFromWire(wire.data, 'output');
    },
  );
  // A stream has no overall deadline: its reader paces it, and cancels it.
  streams.add(stream as ActorStream<unknown>, conn.request(message));
  return stream;
}
