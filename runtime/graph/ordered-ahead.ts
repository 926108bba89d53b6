/**
 * Maps the items of `source` through `run`, with up to `ahead` runs in flight at once, and yields
 * their results in the order of the items. A result is yielded as soon as it and every result
 * before it are ready, without waiting for more items (a slow source, like a generator emitting
 * tokens, still gets each result through at once); the source is pulled only while fewer than
 * `ahead` runs are in flight, so it stays a bounded distance ahead of the reader.
 *
 * The streaming executor uses it where items leave a stream for steps that answer once per item
 * (a model, a plain method): item i+1 is inferred while item i is being labelled, and concurrent
 * items can share a batch. The first failure fails the iteration; returning it stops the source
 * (runs already started finish on their own, and their answers are dropped).
 */
export async function* orderedAhead<T, R>(source: AsyncIterable<T>, run: (item: T) => Promise<R>, ahead: number): AsyncGenerator<R> {
  const items = source[Symbol.asyncIterator]();
  const pending: Promise<R>[] = [];
  let pull: Promise<IteratorResult<T>> | undefined;
  let done = false;
  const start = (item: T) => {
    const result = run(item);
    // Failures are thrown when their turn comes; one dropped by a cancel must not go unhandled.
    result.catch(() => {});
    pending.push(result);
  };
  try {
    for (;;) {
      if (!done && pull === undefined && pending.length < ahead) pull = items.next();
      if (pending.length === 0) {
        if (pull === undefined) return;
        const next = await pull;
        pull = undefined;
        if (next.done) done = true;
        else start(next.value);
        continue;
      }
      const head = pending[0]!;
      const settled = (p: Promise<unknown>, what: 'head' | 'pull') =>
        p.then(
          () => what,
          () => what,
        );
      const first = await Promise.race(pull === undefined ? [settled(head, 'head')] : [settled(head, 'head'), settled(pull, 'pull')]);
      if (first === 'head') {
        void pending.shift();
        yield await head;
        continue;
      }
      const next = await pull!;
      pull = undefined;
      if (next.done) done = true;
      else start(next.value);
    }
  } finally {
    // Stops the source (a stream's generator) when the reader left early or a run failed. With a
    // pull in flight the source's return() waits for it: not awaited then, so a failure is not held
    // up behind a slow source (the run's signal, aborted by its reader, ends that pull).
    if (!done) {
      const stopping = Promise.resolve(items.return?.()).catch(() => undefined);
      if (pull === undefined) await stopping;
    }
  }
}
