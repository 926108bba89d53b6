import { TroupeError } from '../../runtime/internal.js';
import type { WireTensorMap } from '../../runtime/internal.js';
import type { RunGateway, StreamRunRequest } from './run-gateway.js';

/** One stream being read: the reader's credit, and how to stop it. */
interface OpenStream {
  credit: number;
  abort: AbortController;
  wake: (() => void) | undefined;
}

/**
 * Runs read as streams, for every entry point (SDK frames, the HTTP generate endpoints): pulls
 * the run's items (RunGateway.stream) only while the reader has credit, so a slow reader holds
 * every step behind it, and cancels the run when the reader says so or goes away. Like
 * ActorCalls' streams, a stream's id is scoped by its caller (a connection).
 */
export class GraphStreams {
  readonly #graphs: RunGateway;
  readonly #open = new WeakMap<object, Map<string, OpenStream>>();

  constructor(graphs: RunGateway) {
    this.#graphs = graphs;
  }

  /**
   * Reads run `request` for `caller`, handing each item to `push` while credit lasts; resolves
   * with the count after the last. A failure says after which item it came, so nothing is lost
   * or read twice without it being said.
   */
  async stream(
    caller: object,
    id: string,
    request: StreamRunRequest & { credit: number },
    push: (seq: number, outputs: WireTensorMap) => void,
  ): Promise<{ items: number }> {
    const streams = this.#open.get(caller) ?? new Map<string, OpenStream>();
    this.#open.set(caller, streams);
    if (streams.has(id)) throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `stream '${id}' is already open on this connection`);
    const { credit, ...run } = request;
    const open: OpenStream = { credit, abort: new AbortController(), wake: undefined };
    streams.set(id, open);
    const items = this.#graphs.stream(run, open.abort.signal);
    let sent = 0;
    try {
      for (;;) {
        while (open.credit === 0 && !open.abort.signal.aborted) await new Promise<void>((resolve) => (open.wake = resolve));
        if (open.abort.signal.aborted) break;
        const next = await items.next();
        if (next.done) break;
        open.credit--;
        push(sent++, next.value);
      }
      return { items: sent };
    } catch (err) {
      if (err instanceof TroupeError && sent > 0)
        throw new TroupeError(err.code, `${err.message} (after item ${sent - 1} of the stream; no later item was sent)`);
      throw err;
    } finally {
      streams.delete(id);
      open.abort.abort();
      await items.return(undefined).catch(() => {});
    }
  }

  /** The reader of stream `id` took `n` more items' room. */
  credit(caller: object, id: string, n: number): void {
    const open = this.#open.get(caller)?.get(id);
    if (!open) return;
    open.credit += n;
    open.wake?.();
  }

  /** The reader of stream `id` is done: every step's stream stops. */
  cancel(caller: object, id: string): void {
    const open = this.#open.get(caller)?.get(id);
    if (!open) return;
    open.abort.abort();
    open.wake?.();
  }

  /** `caller` went away: its streams stop. */
  closed(caller: object): void {
    for (const id of this.#open.get(caller)?.keys() ?? []) this.cancel(caller, id);
    this.#open.delete(caller);
  }
}
