import { RelayToActorIpcSchema, RelayedTransport, TroupeError } from '../runtime/internal.js';
import type { ActorToRelayIpc, FrameTransport } from '../runtime/internal.js';

/** The link being opened, or the one open now; one at a time (HeadSocket opens the next after this one ended). */
let opening: { resolve: (t: FrameTransport) => void; reject: (e: TroupeError) => void; timer: NodeJS.Timeout } | undefined;
let open: RelayedTransport | undefined;
let listening = false;

function tell(message: ActorToRelayIpc): void {
  if (process.connected) process.send?.(message);
}

function listen(): void {
  if (listening) return;
  listening = true;
  process.on('message', (raw) => {
    const parsed = RelayToActorIpcSchema.safeParse(raw);
    if (!parsed.success) return;
    const message = parsed.data;
    switch (message.type) {
      case 'headOpened':
        return settle((o) => {
          open = new RelayedTransport({
            send: (frame) => tell({ type: 'headFrame', frame }),
            close: (code, reason) => tell({ type: 'headClose', code, reason: reason.slice(0, 256) }),
            // IPC writes are queued by Node out of sight; the agent's connection is where backlog shows.
            bufferedBytes: () => 0,
          });
          o.resolve(open);
        });
      case 'headFrame':
        return open?.deliver(message.frame);
      case 'headClosed':
        if (opening)
          return settle((o) => o.reject(new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', `the agent has no head now: ${message.reason}`)));
        open?.ended(message.code, message.reason);
        open = undefined;
        return;
      case 'headRefused':
        return settle((o) => o.reject(new TroupeError('TROUPE_ERR_UNAUTHORIZED', message.why)));
    }
  });
}

function settle(with_: (o: NonNullable<typeof opening>) => void): void {
  const o = opening;
  if (!o) return;
  opening = undefined;
  clearTimeout(o.timer);
  with_(o);
}

/**
 * Opens this actor's link to the head through its agent (`TROUPE_HEAD_LINK=agent`): the agent
 * presents the actor's id and secret on its own connection and relays frames both ways. Fails as
 * opening a connection does: TROUPE_ERR_UNAUTHORIZED when the head refuses the actor, another code
 * (retried by HeadSocket) when the agent has no head now or does not answer within `timeoutMs`.
 */
export function openThroughAgent(timeoutMs: number): Promise<FrameTransport> {
  listen();
  if (!process.connected) return Promise.reject(new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', 'no agent to relay the link to the head'));
  open?.ended(1006, 'reopened');
  open = undefined;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () =>
        settle((o) =>
          o.reject(new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', `the agent did not open a link to the head within ${timeoutMs} ms`)),
        ),
      timeoutMs,
    );
    opening = { resolve, reject, timer };
    tell({ type: 'headOpen' });
  });
}
