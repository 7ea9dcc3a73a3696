// gRPC over HTTP/2 as grpc-js puts it on the wire: the message framing and the response headers.
// Shared by every path that answers HTTP/2 streams without grpc-js's call machinery (the client
// fast paths in src/api, the peers' Raft stream in src/transport), so they stay byte-equal to it.
import assert from 'node:assert';
import type * as http2 from 'node:http2';

/** A gRPC message is prefixed by a compressed flag (1 byte) and a big-endian length (4 bytes). */
export const FRAME_HEADER_BYTES = 5;

/** grpc-js's response headers (defaultResponseHeaders + defaultCompressionHeaders). */
// Frozen: src/h2 indexes the fields of frozen header objects in the client's HPACK table (FrozenHeaderEncoder).
export const RESPONSE_HEADERS: http2.OutgoingHttpHeaders = Object.freeze({
  ':status': 200,
  'content-type': 'application/grpc+proto',
  'grpc-accept-encoding': 'identity,deflate,gzip',
  'grpc-encoding': 'identity',
});

/** A trailers-only (error) response carries these besides the status (grpc-js's defaultResponseHeaders). */
export const ERROR_HEADERS: http2.OutgoingHttpHeaders = Object.freeze({ ':status': 200, 'content-type': 'application/grpc+proto' });

/** grpc-js's text for a compressed-flag message on a stream whose encoding is identity. */
export const COMPRESSED_IDENTITY_TEXT = 'Received compressed message but "grpc-encoding" header was identity';

/**
 * Set by the protobuf encoders on a large encoding made with FRAME_HEADER_BYTES free in front of it
 * (src/pb/wire.ts, allocEncoding): the whole buffer, room included.
 */
const PREFIX_ROOM = Symbol.for('etcd-ts.prefixRoom');

/** One length-prefixed, uncompressed gRPC message; written in front of `body` when it has room there. */
export function frameMessage(body: Buffer): Buffer {
  const whole = (body as Buffer & { [PREFIX_ROOM]?: Buffer })[PREFIX_ROOM];
  if (whole !== undefined) {
    // Only a body still exactly where allocEncoding put it: the room is then its own.
    assert(whole.buffer === body.buffer && whole.byteOffset + FRAME_HEADER_BYTES === body.byteOffset && whole.length === FRAME_HEADER_BYTES + body.length, 'prefix room does not match its body');
    whole[0] = 0;
    whole.writeUInt32BE(body.length, 1);
    return whole;
  }
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + body.length);
  frame[0] = 0;
  frame.writeUInt32BE(body.length, 1);
  body.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

/**
 * Several messages framed into one buffer of `framedBytes` (their bodies plus a prefix each): one
 * copy of each body, where framing each (frameMessage) and then joining the frames copied it
 * twice. A watch stream queues several responses per turn; kube-mix's watchers framed ~10 MB/s.
 */
export function frameMessages(bodies: readonly Buffer[], framedBytes: number): Buffer {
  if (bodies.length === 1) return frameMessage(bodies[0]!);
  const out = Buffer.allocUnsafe(framedBytes);
  let at = 0;
  for (const body of bodies) {
    out[at] = 0;
    out.writeUInt32BE(body.length, at + 1);
    at += FRAME_HEADER_BYTES + body.copy(out, at + FRAME_HEADER_BYTES);
  }
  if (at !== framedBytes) assert.fail(`framed ${at} bytes of messages, meant ${framedBytes}`);
  return out;
}
