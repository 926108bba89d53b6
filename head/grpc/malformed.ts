import type { ServiceDefinition } from '@grpc/grpc-js';
import { TroupeError } from '../../runtime/internal.js';

/**
 * A request whose bytes are not a protobuf of the method's message. grpc-js would answer those
 * INTERNAL with its own words; the head answers them as any bad request (INVALID_ARGUMENT,
 * TROUPE_ERR_BAD_REQUEST), so a client sees one kind of refusal for one kind of mistake and
 * INTERNAL stays a sign of our bugs.
 */
export class MalformedMessage {
  constructor(
    readonly type: string,
    readonly why: string,
  ) {}
}

/** The same service, with decoders that hand the handlers a MalformedMessage instead of failing the call. */
export function tolerantDecoding(service: ServiceDefinition): ServiceDefinition {
  const tolerant = Object.entries(service).map(([name, method]) => {
    const decode = method.requestDeserialize;
    const requestDeserialize = (bytes: Buffer): unknown => {
      try {
        return decode(bytes);
      } catch (err) {
        return new MalformedMessage(`${name}Request`, (err as Error).message);
      }
    };
    return [name, { ...method, requestDeserialize }] as const;
  });
  return Object.fromEntries(tolerant) as ServiceDefinition;
}

/** Throws TROUPE_ERR_BAD_REQUEST for a request that did not decode. */
export function checkDecoded(message: unknown): void {
  if (message instanceof MalformedMessage)
    throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `the request is not a valid ${message.type} protobuf: ${message.why.slice(0, 200)}`);
}
