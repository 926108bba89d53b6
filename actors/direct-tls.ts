import { DirectTlsIpcSchema, TroupeError } from '../runtime/internal.js';
import type { TlsIdentity } from '../runtime/internal.js';

/** How long an actor waits for its agent's answer; the agent answers at once from memory. */
const ASK_TIMEOUT_MS = 10_000;

/**
 * Under TLS (the agent set TROUPE_DIRECT_TLS), the certificate and key this actor's direct port
 * presents: the head's, asked of the agent over IPC, so the key is in no environment, argument,
 * file or log line. Undefined when the cluster runs without TLS. Rejects when the agent does not
 * answer: the port then stays closed rather than open in clear.
 */
export function directTlsFromAgent(): Promise<TlsIdentity | undefined> {
  if (process.env.TROUPE_DIRECT_TLS !== '1') return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      process.off('message', listen);
      reject(new TroupeError('TROUPE_ERR_INTERNAL', `the agent did not send the direct port's certificate within ${ASK_TIMEOUT_MS} ms`));
    }, ASK_TIMEOUT_MS);
    const listen = (raw: unknown) => {
      const parsed = DirectTlsIpcSchema.safeParse(raw);
      if (!parsed.success) return;
      clearTimeout(timer);
      process.off('message', listen);
      resolve({ cert: parsed.data.cert, key: parsed.data.key });
    };
    process.on('message', listen);
    if (!process.send) {
      clearTimeout(timer);
      process.off('message', listen);
      reject(new TroupeError('TROUPE_ERR_INTERNAL', 'TROUPE_DIRECT_TLS is set but this actor has no IPC channel to its agent'));
      return;
    }
    process.send({ type: 'directTlsAsk' });
  });
}
