import { createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import {
  Channel,
  ClientToReplicaSchema,
  DEFAULT_MAX_FRAME_BYTES,
  FrameStream,
  MappedRegions,
  TroupeError,
  newSecret,
  sameSecret,
  sharedMemoryAddon,
} from '../runtime/internal.js';
import type { ActorCall, ActorToHead, ClientToReplica, TlsIdentity } from '../runtime/internal.js';

export interface DirectServer {
  /** Where clients connect, e.g. `tcp://127.0.0.1:41234` (`tls://` under TLS). */
  readonly url: string;
  /** The token a client must say hello with; the head hands it only to clients it admitted. */
  readonly token: string;
  close(): void;
}

/**
 * Serves one call from an admitted client, its inputs resolved to wire tensors (those the client
 * put in shared memory are views of its region); `release` frees the frame its tensors are views of.
 */
export type ServeDirectCall = (call: ActorCall, channel: Channel<ClientToReplica, ActorToHead>, release: (() => void) | undefined) => void;

/** Until its hello, a connection may send no frame longer than this, and has this long to send it. */
const HELLO_MAX_BYTES = 4096;
const HELLO_TIMEOUT_MS = 10_000;
/** Open client connections at once; one past it is closed as it arrives (each holds buffers and a region map). */
const MAX_CONNECTIONS = 4096;

/**
 * The actor's own endpoint for calls from SDK clients, so a call crosses two process hops instead
 * of four and the head never touches its tensors (with images, the head's copies and GC were
 * most of its CPU: bench/RESULTS-hops.md). The head stays the control plane: it tells admitted clients where each
 * READY replica listens and with which token, and still serves HTTP, graphs and futures.
 *
 * It speaks length-prefixed frames over TCP (see runtime/transport/frame-stream.ts) rather than
 * WebSocket messages: images arrive in reused buffers, read once by the kernel. A connection
 * first says `hello` with the token (answered `reply`, or `fail` TROUPE_ERR_UNAUTHORIZED and
 * closed), then sends calls; it may not send a large frame before that. A client on this host may
 * also offer shared-memory regions (see runtime/shm/) and name their bytes as inputs.
 *
 * With `tls` (the cluster runs TLS: the head's certificate, docs/security.md) it serves TLS only:
 * a plaintext client fails the handshake before a frame is read, and the token and tensors cross
 * encrypted. Shared-memory inputs never touch a socket either way.
 */
export async function startDirectServer(host: string, serve: ServeDirectCall, tls?: TlsIdentity): Promise<DirectServer> {
  const token = newSecret();
  const streams = new Set<FrameStream>();
  // Paused: nothing is read until the socket is handed to a stream that reads in place.
  const server: Server = tls
    ? createTlsServer({ cert: tls.cert, key: tls.key, noDelay: true, handshakeTimeout: HELLO_TIMEOUT_MS })
    : createServer({ pauseOnConnect: true, noDelay: true });
  server.maxConnections = MAX_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => (server.off('error', reject), resolve()));
  });
  // After listening, an error (a socket reset mid-accept) must not take the actor down.
  server.on('error', () => {});
  // A failed handshake (a plaintext client among them) only closes that connection.
  server.on('tlsClientError', () => {});
  server.on(tls ? 'secureConnection' : 'connection', (socket: Socket) => {
    const stream = FrameStream.adopt(socket, { maxFrameBytes: HELLO_MAX_BYTES, pooled: true });
    streams.add(stream);
    const regions = new MappedRegions(sharedMemoryAddon());
    let admitted = false;
    const refuse = (id: string, why: string) => {
      channel.fail(id, new TroupeError('TROUPE_ERR_UNAUTHORIZED', why));
      channel.close(1008, why);
    };
    const channel: Channel<ClientToReplica, ActorToHead> = new Channel<ClientToReplica, ActorToHead>(stream, {
      schema: ClientToReplicaSchema,
      onMessage: (message, release) => {
        if (admitted && message.type === 'call') {
          try {
            return serve({ ...message, inputs: regions.resolve(message.inputs) }, channel, release);
          } catch (err) {
            release?.();
            return channel.fail(message.id, err);
          }
        }
        release?.();
        if (admitted && message.type === 'region') {
          try {
            regions.accept(message);
            return channel.reply(message.id, {});
          } catch (err) {
            return channel.fail(message.id, err);
          }
        }
        if (admitted)
          return channel.fail(message.id, new TroupeError('TROUPE_ERR_BAD_MESSAGE', 'hello was already said on this connection'));
        if (message.type !== 'hello') return refuse(message.id, "say 'hello' with the replica's token before calling it");
        if (!sameSecret(message.token, token))
          return refuse(message.id, "wrong token for this replica (ask the head for the replica's routes)");
        admitted = true;
        clearTimeout(timer);
        stream.maxFrameBytes = DEFAULT_MAX_FRAME_BYTES;
        channel.reply(message.id, {});
      },
      onClose: () => {
        clearTimeout(timer);
        streams.delete(stream);
      },
    });
    const timer = setTimeout(() => channel.terminate(), HELLO_TIMEOUT_MS);
  });
  const { port } = server.address() as AddressInfo;
  const shown = host.includes(':') ? `[${host}]` : host;
  return {
    url: `${tls ? 'tls' : 'tcp'}://${shown}:${port}`,
    token,
    close: () => {
      server.close();
      for (const stream of streams) stream.terminate();
    },
  };
}
