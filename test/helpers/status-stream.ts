import assert from 'node:assert/strict';
import type { StatusSnapshot } from '../../head/status/client/protocol.js';

/** The status stream of a head, read as the page reads it: one `snapshot` event at a time. */
export class StreamReader {
  readonly #abort = new AbortController();
  readonly #reader: Promise<ReadableStreamDefaultReader<Uint8Array>>;
  #buffer = '';
  readonly #decoder = new TextDecoder();

  constructor(url: string) {
    this.#reader = fetch(`${url}/api/v1/stream`, { signal: this.#abort.signal }).then((res) => {
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
      return res.body!.getReader();
    });
  }

  /** The next snapshot, or a failure after `timeoutMs`. */
  async next(timeoutMs = 10_000): Promise<StatusSnapshot> {
    const reader = await this.#reader;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const end = this.#buffer.indexOf('\n\n');
      if (end >= 0) {
        const frame = this.#buffer.slice(0, end);
        this.#buffer = this.#buffer.slice(end + 2);
        const data = frame.split('\n').find((l) => l.startsWith('data: '));
        assert.match(frame, /^event: snapshot\n/);
        return JSON.parse(data!.slice('data: '.length)) as StatusSnapshot;
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no snapshot within ${timeoutMs} ms`);
      let timer: NodeJS.Timeout | undefined;
      const chunk = await Promise.race([
        reader.read(),
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no snapshot within ${timeoutMs} ms`)), left))),
      ]).finally(() => clearTimeout(timer));
      if (chunk.done) throw new Error('the stream ended');
      this.#buffer += this.#decoder.decode(chunk.value, { stream: true });
    }
  }

  /** Reads snapshots until `check` accepts one; bounded. */
  async until<T>(what: string, check: (s: StatusSnapshot) => T | undefined | false, timeoutMs = 20_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      const found = check(await this.next(left));
      if (found !== undefined && found !== false) return found;
    }
  }

  close(): void {
    this.#abort.abort();
  }
}
