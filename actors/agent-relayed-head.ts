import { RelayToActorIpcSchema, RelayedTransport, TroupeError } from '../runtime/internal.js';
import type { ActorToRelayIpc, FrameTransport } from '../runtime/internal.js';

interface Opening {
  seq: number;
  resolve: (t: FrameTransport) => void;
  reject: (e: TroupeError) => void;
  timer: NodeJS.Timeout;
}

/** Each opening of the link is numbered; the agent's answers name the one they are about. */
let nextSeq = 0;
/** The opening waiting for its answer, and the link open now: one of each at most. */
let opening: Opening | undefined;
let open: { seq: number; transport: RelayedTransport } | undefined;
let listening = false;

function tell(message: ActorToRelayIpc, sent?: () => void): void {
  if (process.connected) process.send?.(message, undefined, {}, () => sent?.());
  else sent?.();
}

function listen(): void {
  if (listening) return;
  listening = true;
  process.on('message', (raw) => {
    const parsed = RelayToActorIpcSchema.safeParse(raw);
    if (!parsed.success) return;
    const message = parsed.data;
    switch (message.type) {
      case 'headOpened': {
        const o = take(message.seq);
        // An answer to an opening given up on (timed out, or replaced): that link is not wanted.
        if (!o) return tell({ type: 'headClose', seq: message.seq, code: 1001, reason: 'the actor no longer waits for this link' });
        const seq = o.seq;
        const transport = new RelayedTransport({
          send: (frame) => tell({ type: 'headFrame', seq, frame }),
          // Ends once the close has been written after everything sent before it (an exit right after loses nothing).
          close: (code, reason) =>
            new Promise<void>((resolve) => tell({ type: 'headClose', seq, code, reason: reason.slice(0, 256) }, resolve)),
          // IPC writes are queued by Node out of sight; the agent's connection is where backlog shows.
          bufferedBytes: () => 0,
        });
        open = { seq, transport };
        return o.resolve(transport);
      }
      case 'headFrame':
        if (open?.seq === message.seq) open.transport.deliver(message.frame);
        return;
      case 'headClosed': {
        const o = take(message.seq);
        if (o)
          return o.reject(
            new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', `the agent could not open a link to the head: ${message.reason}`),
          );
        if (open?.seq !== message.seq) return;
        const { transport } = open;
        open = undefined;
        transport.ended(message.code, message.reason);
        return;
      }
      case 'headRefused':
        take(message.seq)?.reject(new TroupeError('TROUPE_ERR_UNAUTHORIZED', message.why));
        return;
    }
  });
}

/** The opening numbered `seq`, if it is the one waiting; it waits no more. */
function take(seq: number): Opening | undefined {
  const o = opening;
  if (o?.seq !== seq) return undefined;
  opening = undefined;
  clearTimeout(o.timer);
  return o;
}

/**
 * Opens this actor's link to the head through its agent (`TROUPE_HEAD_LINK=agent`): the agent
 * presents the actor's id and secret on its own connection and relays frames both ways. Fails as
 * opening a connection does: TROUPE_ERR_UNAUTHORIZED when the head refuses the actor, another code
 * (retried by HeadSocket) when the agent has no head now or does not answer within `timeoutMs`.
 * A link still open is closed first: one link at a time.
 */
export function openThroughAgent(timeoutMs: number): Promise<FrameTransport> {
  listen();
  if (!process.connected) return Promise.reject(new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', 'no agent to relay the link to the head'));
  open?.transport.close(1001, 'the actor opens another link');
  open = undefined;
  if (opening) take(opening.seq)?.reject(new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', 'replaced by a newer opening'));
  const seq = nextSeq++;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () =>
        take(seq)?.reject(
          new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', `the agent did not open a link to the head within ${timeoutMs} ms`),
        ),
      timeoutMs,
    );
    opening = { seq, resolve, reject, timer };
    tell({ type: 'headOpen', seq });
  });
}
