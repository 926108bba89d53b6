import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RelayedTransport } from '../../runtime/internal.js';
import type { FrameSink } from '../../runtime/internal.js';

/** What a sink was told, in order. */
function recordingSink(): { sink: FrameSink; seen: string[] } {
  const seen: string[] = [];
  return {
    seen,
    sink: {
      frame: (bytes) => seen.push(`frame ${bytes.toString()}`),
      refused: (error) => seen.push(`refused ${error.code}`),
      closed: (code, reason) => seen.push(`closed ${code} ${reason}`),
    },
  };
}

describe('RelayedTransport: an actor link carried inside another connection', () => {
  test('frames that arrive before the channel starts are kept and delivered first; a close before the start is told after them', () => {
    const transport = new RelayedTransport({ send: () => {}, close: () => {}, bufferedBytes: () => 0 });
    transport.deliver(Buffer.from('a'));
    transport.deliver(new Uint8Array([98]));
    transport.ended(1001, 'gone');
    transport.deliver(Buffer.from('late'));
    const { sink, seen } = recordingSink();
    transport.start(sink);
    assert.deepEqual(seen, ['frame a', 'frame b', 'closed 1001 gone']);
  });

  test('a message of several parts goes to the relay as one frame; nothing is sent once closing', () => {
    const sent: string[] = [];
    const transport = new RelayedTransport({ send: (f) => sent.push(Buffer.from(f).toString()), close: () => {}, bufferedBytes: () => 7 });
    transport.start(recordingSink().sink);
    transport.send([Buffer.from('he'), Buffer.from('llo')]);
    assert.equal(transport.bufferedBytes, 7);
    transport.close(1000, 'bye');
    transport.send([Buffer.from('after')]);
    assert.deepEqual(sent, ['hello']);
  });

  test('a close the relay confirms later ends the link only then (what was sent before it has left)', async () => {
    let confirm!: () => void;
    const closes: string[] = [];
    const transport = new RelayedTransport({
      send: () => {},
      close: (code, reason) => {
        closes.push(`${code} ${reason}`);
        return new Promise<void>((resolve) => (confirm = resolve));
      },
      bufferedBytes: () => 0,
    });
    const { sink, seen } = recordingSink();
    transport.start(sink);
    transport.close(1000, 'stopping');
    transport.close(1000, 'again');
    assert.deepEqual(closes, ['1000 stopping'], 'the relay is told once');
    assert.deepEqual(seen, [], 'not ended before the relay confirms');
    confirm();
    await Promise.resolve();
    await Promise.resolve();
    assert.deepEqual(seen, ['closed 1000 stopping']);
    transport.deliver(Buffer.from('late'));
    assert.deepEqual(seen, ['closed 1000 stopping'], 'nothing after the end');
  });
});
