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

/**
 * grpc-go's text for a status text grpc-js produced; any other text is returned as it is.
 * `knownService` tells an unknown method of a served service from an unknown service.
 */
export function grpcGoDetails(details: string, knownService: (service: string) => boolean): string {
  let m = GRPC_JS_RECEIVED_TOO_LARGE.exec(details);
  if (m) return receivedTooLargeText(Number(m[1]), Number(m[2]));
  m = GRPC_JS_SENT_TOO_LARGE.exec(details);
  if (m) return sendTooLargeText(Number(m[1]), Number(m[2]));
  m = GRPC_JS_UNIMPLEMENTED.exec(details);
  if (m) return knownService(m[1]!) ? `unknown method ${m[2]} for service ${m[1]}` : `unknown service ${m[1]}`;
  return details;
}
