// The peer Stream call answered on the HTTP/2 stream itself, on the wire exactly as grpc-js
// would (gRPC length-prefixed messages, response headers, status trailers).
//
// Measured with two processes exchanging heartbeats over the Stream call: grpc-js's server call
// machinery (interceptors, a message decoder stream, an object-mode Readable per call) cost about
// as much CPU per received message as the HTTP/2 layer underneath. Raft sends many small messages,
// so the receiving side reads the frames here and hands the batches straight to the Receiver.
import assert from 'node:assert';
import type * as http2 from 'node:http2';
import type * as grpc from '@grpc/grpc-js';
import { hookServerStreams } from '../grpcjs/stream_hook';
import { COMPRESSED_IDENTITY_TEXT, ERROR_HEADERS, FRAME_HEADER_BYTES, RESPONSE_HEADERS } from '../grpcjs/wire';

export interface StreamStatus {
  code: grpc.status;
  details: string;
}

/**
 * Routes HTTP/2 streams for `path` to `handle` instead of grpc-js's call machinery. Must run
 * before the server binds (grpc-js binds its handler to each listener then). `handle` returns
 * false for a stream it does not take (grpc-js then serves it as usual).
 */
export function installRawStreamHandler(
  server: grpc.Server,
  path: string,
  handle: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => boolean,
): void {
  hookServerStreams(server, (stream, headers) => headers[':path'] === path && handle(stream, headers));
}

export function headerText(headers: http2.IncomingHttpHeaders, key: string): string {
  const v = headers[key];
  return typeof v === 'string' ? v : Array.isArray(v) ? (v[0] ?? '') : '';
}

/** Refuses a stream before anything was sent: a trailers-only response, as grpc-js sends one. */
export function refuseStream(stream: http2.ServerHttp2Stream, s: StreamStatus): void {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond({ ...ERROR_HEADERS, 'grpc-status': String(s.code), 'grpc-message': encodeURI(s.details) }, { endStream: true });
}

/** Sends the response headers (the caller counts the peer as active on them) and keeps trailers for the end. */
export function acceptStream(stream: http2.ServerHttp2Stream): void {
  stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
}

/** Ends an accepted stream with a status in its trailers. Idempotent. */
export function endStream(stream: http2.ServerHttp2Stream, s: StreamStatus): void {
  if (stream.destroyed || stream.closed || stream.writableEnded) return;
  stream.once('wantTrailers', () => {
    stream.sendTrailers({ 'grpc-status': String(s.code), 'grpc-message': encodeURI(s.details) });
  });
  stream.end();
}

/**
 * Splits a byte stream into gRPC messages. A message inside one chunk is handed out as a view
 * of it (no copy); one spread over chunks is assembled in a buffer of its announced size.
 */
export class GrpcMessageReader {
  private readonly head = Buffer.alloc(FRAME_HEADER_BYTES);
  private headBytes = 0;
  private body: Buffer | null = null;
  private bodyBytes = 0;

  constructor(private readonly maxMessageBytes: number) {
    assert(maxMessageBytes > 0);
  }

  /** Feeds one chunk; returns a status to end the stream with when the data cannot be read. */
  push(chunk: Buffer, onMessage: (msg: Buffer) => void): StreamStatus | null {
    let pos = 0;
    while (pos < chunk.length) {
      if (this.body !== null) {
        const body = this.body;
        const n = Math.min(body.length - this.bodyBytes, chunk.length - pos);
        chunk.copy(body, this.bodyBytes, pos, pos + n);
        this.bodyBytes += n;
        pos += n;
        if (this.bodyBytes < body.length) break;
        this.body = null;
        this.bodyBytes = 0;
        onMessage(body);
        continue;
      }
      let flag: number;
      let len: number;
      if (this.headBytes === 0 && chunk.length - pos >= FRAME_HEADER_BYTES) {
        flag = chunk[pos]!;
        len = chunk.readUInt32BE(pos + 1);
        pos += FRAME_HEADER_BYTES;
      } else {
        const n = Math.min(FRAME_HEADER_BYTES - this.headBytes, chunk.length - pos);
        chunk.copy(this.head, this.headBytes, pos, pos + n);
        this.headBytes += n;
        pos += n;
        if (this.headBytes < FRAME_HEADER_BYTES) break;
        this.headBytes = 0;
        flag = this.head[0]!;
        len = this.head.readUInt32BE(1);
      }
      // What grpc-js answers for these (13 = INTERNAL, 8 = RESOURCE_EXHAUSTED).
      if (flag !== 0) return { code: 13, details: COMPRESSED_IDENTITY_TEXT };
      if (len > this.maxMessageBytes) return { code: 8, details: `Received message larger than max (${len} vs. ${this.maxMessageBytes})` };
      if (chunk.length - pos >= len) {
        // The whole message is in this chunk: hand out a view, no copy.
        onMessage(chunk.subarray(pos, pos + len));
        pos += len;
      } else {
        this.body = Buffer.allocUnsafe(len);
      }
    }
    return null;
  }
}
