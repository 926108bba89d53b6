import { status } from '@grpc/grpc-js';
import { BaseServerInterceptingCall } from '@grpc/grpc-js/build/src/server-interceptors.js';

/**
 * A message whose Compressed-Flag is 1 on a call without a `grpc-encoding` header (identity) is a
 * protocol error (the gRPC spec: the flag says the message is compressed with the encoding the
 * header names). grpc-js reads such a message as uncompressed and takes it; this refuses it with
 * INVALID_ARGUMENT and TROUPE_ERR_BAD_REQUEST instead. grpc-js offers no hook where the flag is
 * seen, so its one method that receives the flagged frame is wrapped, once per process, here.
 */
type Decompress = (this: unknown, message: Buffer, encoding: string) => Buffer | Promise<Buffer>;

let installed = false;

export function refuseFlaggedUncompressed(): void {
  if (installed) return;
  installed = true;
  const proto = BaseServerInterceptingCall.prototype as unknown as { decompressMessage: Decompress };
  const decompress = proto.decompressMessage;
  if (typeof decompress !== 'function') return;
  proto.decompressMessage = function (message, encoding) {
    if (encoding === 'identity' && message.byteLength > 0 && message.readUInt8(0) === 1)
      return Promise.reject({
        code: status.INVALID_ARGUMENT,
        details: 'TROUPE_ERR_BAD_REQUEST: a message is flagged compressed, but the call names no grpc-encoding to decompress it with',
      });
    return decompress.call(this, message, encoding);
  };
}
