import { TroupeError } from '../../runtime/internal.js';
import type { ClientToHead } from '../../runtime/internal.js';

/**
 * What an SDK client without the cluster token may ask of a head that listens on loopback only:
 * what HTTP and gRPC let such callers do (runtime/http/auth.ts, docs/security.md): run inference,
 * graphs and futures (a run may name earlier runs' futures), read, and the plumbing those need
 * (direct routes, load reports, stream credit). Everything else (deploy, undeploy, class actors'
 * methods, which change an instance's state) needs the token, as the matching HTTP routes do.
 * A list of what is allowed, not of what is refused: a message type added later needs the token
 * until someone decides otherwise here.
 */
const WITHOUT_TOKEN = new Set<ClientToHead['type']>([
  'hello',
  'describe',
  'run',
  'runStream',
  'streamCredit',
  'streamCancel',
  'routes',
  'load',
]);

/** The refusal for `message` on a connection without the token, or undefined when it may go on. */
export function tokenlessRefusal(message: ClientToHead): TroupeError | undefined {
  if (WITHOUT_TOKEN.has(message.type)) return undefined;
  const what = message.type === 'invoke' || message.type === 'stream' ? "calling a class actor's methods" : message.type;
  return new TroupeError(
    'TROUPE_ERR_UNAUTHORIZED',
    `${what} needs the cluster token: this client connected without one, which a head on loopback allows for inference, jobs and futures only; connect(url, { token }) or set TROUPE_TOKEN`,
  );
}
