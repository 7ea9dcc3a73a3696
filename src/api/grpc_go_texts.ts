// The texts of errors the gRPC layer itself produces, as etcd's clients see them from etcd:
// grpc-go's. Clients and people match them (a size limit, an unknown method), so grpc-js's own
// wording must not reach them.

/** A message over the receive limit (grpc-go's recv, code RESOURCE_EXHAUSTED). */
export function receivedTooLargeText(sizeBytes: number, maxBytes: number): string {
  return `grpc: received message larger than max (${sizeBytes} vs. ${maxBytes})`;
}

/** A response over the send limit (grpc-go's server send, code RESOURCE_EXHAUSTED). */
export function sendTooLargeText(sizeBytes: number, maxBytes: number): string {
  return `grpc: trying to send message larger than max (${sizeBytes} vs. ${maxBytes})`;
}

const GRPC_JS_RECEIVED_TOO_LARGE = /^Received message larger than max \((\d+) vs\.? (\d+)\)$/;
const GRPC_JS_SENT_TOO_LARGE = /^Sent message larger than max \((\d+) vs\.? (\d+)\)$/;
const GRPC_JS_UNIMPLEMENTED = /^The server does not implement the method \/([^/]*)\/(.*)$/;

const GRPC_JS_DESERIALIZE = /^Error deserializing request(?:: (.*))?$/;
const GRPC_JS_COMPRESSED_IDENTITY = 'Received compressed message but "grpc-encoding" header was identity';
/**
 * The reason given for a request that does not decode. grpc-go gives the Go protobuf library's
 * error (`unexpected EOF`, `proto: wrong wireType = 2 for field TTL`, ...), which no decoder of
 * ours words alike; one fixed reason, the same on every path, rather than our decoders' internals.
 */
export const UNDECODABLE = 'bad wire-format data';

/** What grpcGoDetails needs to know of the call (src/grpcjs/stream_hook.ts CallOfStatus). */
export interface CallKind {
  knownService(service: string): boolean;
  methodType: string | undefined;
}

/**
 * grpc-go's text for a status text grpc-js produced; any other text is returned as it is.
 * An unknown method of a served service and an unknown service are told apart; a request that
 * does not decode is worded as grpc-go words it for the method's kind.
 */
export function grpcGoDetails(details: string, call: CallKind): string {
  let m = GRPC_JS_RECEIVED_TOO_LARGE.exec(details);
  if (m) return receivedTooLargeText(Number(m[1]), Number(m[2]));
  m = GRPC_JS_SENT_TOO_LARGE.exec(details);
  if (m) return sendTooLargeText(Number(m[1]), Number(m[2]));
  m = GRPC_JS_UNIMPLEMENTED.exec(details);
  if (m) return call.knownService(m[1]!) ? `unknown method ${m[2]} for service ${m[1]}` : `unknown service ${m[1]}`;
  m = GRPC_JS_DESERIALIZE.exec(details);
  if (m) {
    return call.methodType === 'unary' ? unmarshalRequestText() : unmarshalStreamText();
  }
  if (details === GRPC_JS_COMPRESSED_IDENTITY) return COMPRESSED_FLAG_IDENTITY_TEXT;
  return details;
}

/** A unary call whose stream ended before any message (grpc-go: io.EOF, code UNKNOWN). */
export const NO_MESSAGE_TEXT = 'EOF';
/** A unary call whose stream ended inside its message (grpc-go: io.ErrUnexpectedEOF, code UNKNOWN). */
export const TORN_MESSAGE_TEXT = 'unexpected EOF';
/** A message flagged compressed on a stream with no grpc-encoding (code INTERNAL). */
export const COMPRESSED_FLAG_IDENTITY_TEXT = 'grpc: compressed flag set with identity or empty encoding';

/**
 * A unary request that does not decode (code INTERNAL). grpc-go appends the protobuf library's
 * error, whose words are Go's own; ours says what our decoder found.
 */
export function unmarshalRequestText(why: string = UNDECODABLE): string {
  return `grpc: error unmarshalling request: ${why}`;
}

/** A streamed request that does not decode (grpc-go's RecvMsg on the server, code INTERNAL). */
export function unmarshalStreamText(why: string = UNDECODABLE): string {
  return `grpc: failed to unmarshal the received message: ${why}`;
}
