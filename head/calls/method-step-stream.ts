import { ActorStream, TroupeError, WireTensorMapSchema, newId } from '../../runtime/internal.js';
import type { LinkStream, WireTensorMap } from '../../runtime/internal.js';
import type { ClusterState } from '../state/cluster-state.js';
import { checkMethodInputs, classActor, split } from './method-steps.js';

/**
 * Opens the stream of one streaming graph step (a generator method, `actor#method`): the step's
 * inputs go to the least busy instance as its one argument, and its items (maps of tensors) come
 * back as they are yielded. The instance runs at most `window` items ahead of what the graph took
 * (the credit is granted back as items are read, half a window at a time, as an SDK reader does).
 * `return()` or `signal` cancels the generator; an instance that dies fails the next read with
 * the retryable TROUPE_ERR_ACTOR_DIED.
 */
export function openMethodStepStream(
  state: ClusterState,
  key: string,
  inputs: WireTensorMap,
  window: number,
  signal: AbortSignal,
): AsyncIterableIterator<WireTensorMap> {
  const { actor, method } = split(key);
  const d = classActor(state, actor, method);
  checkMethodInputs(d, method, inputs);
  let started: Omit<LinkStream, 'done'> | undefined;
  let pendingCredit = 0;
  let cancelled = false;
  const stream = new ActorStream<WireTensorMap>(newId(), window, {
    grant: (n) => (started ? started.credit(n) : (pendingCredit += n)),
    cancel: () => {
      cancelled = true;
      started?.cancel();
    },
  });
  const done = d.dispatcher.methods.submit(method, [inputs], {
    tensors: true,
    stream: {
      credit: window,
      onItem: (seq, value) => {
        const item = WireTensorMapSchema.safeParse(value);
        if (item.success) return stream.push(seq, item.data);
        stream.fail(new TroupeError('TROUPE_ERR_METHOD_FAILED', `item ${seq} of ${actor}.${method}() is not a map of tensors`));
        started?.cancel();
      },
      onStart: (controls) => {
        started = controls;
        if (cancelled) controls.cancel();
        else if (pendingCredit > 0) controls.credit(pendingCredit);
      },
    },
  });
  done.then(
    () => stream.end(),
    (err: unknown) => stream.fail(err),
  );
  const onAbort = () => void stream.return();
  signal.addEventListener('abort', onAbort, { once: true });
  void done.finally(() => signal.removeEventListener('abort', onAbort)).catch(() => {});
  return stream;
}
