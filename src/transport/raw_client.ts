// The sending side of the peer Stream call on a plain HTTP/2 connection: the same request
// headers, gRPC message framing and status handling grpc-js's client would use, without its
// per-message call stack (interceptors, filters, promise hops), which cost as much CPU per
// message as the HTTP/2 layer itself. Used for insecure peer URLs; TLS peers go through grpc-js.
import assert from 'node:assert';
import * as http2 from 'node:http2';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import type { PeerTarget } from './urls';

/** The end of a stream: grpc-js's ServiceError shape, so callers handle both paths alike. */
export interface StreamEnd extends Error {
  code: grpc.status;
  details: string;
}

function streamEnd(code: grpc.status, details: string): StreamEnd {
  const e = new Error(`${code} ${grpc.status[code] ?? ''}: ${details}`) as StreamEnd;
  e.code = code;
  e.details = details;
  return e;
}

export interface RawStreamHandlers {
  /** The peer accepted the call (response headers without a status). */
  onAccepted(): void;
  /** The call ended; `end.code` is OK when the peer closed it normally. Called once. */
  onEnded(end: StreamEnd): void;
}

export interface RawStreamOptions {
  path: string;
  /** Request metadata (lower-case keys). */
  metadata: Record<string, string>;
  keepaliveTimeMs: number;
  keepaliveTimeoutMs: number;
}

function decodeGrpcMessage(v: unknown): string {
  if (typeof v !== 'string') return '';
  try {
    return decodeURIComponent(v);
  } catch {
    return v;
  }
}

/** One client-streaming call on its own HTTP/2 connection. */
export class RawClientStream {
  private readonly session: http2.ClientHttp2Session;
  private readonly stream: http2.ClientHttp2Stream;
  private ended = false;
  private connected = false;
  private pingOutstanding = false;
  private readonly keepalive: NodeJS.Timeout;

  constructor(target: PeerTarget, opts: RawStreamOptions, private readonly handlers: RawStreamHandlers) {
    assert(!target.secure, 'the raw peer stream carries no TLS');
    const unixPath = target.target.startsWith('unix:') ? target.target.slice('unix:'.length) : null;
    const authority = unixPath === null ? target.target : 'localhost';
    this.session = http2.connect(`http://${authority}`, {
      // One batch (at most a few MiB) is in flight at a time; Node's 10 MB default would still
      // refuse a session that briefly holds two large ones with their frame overhead.
      maxSessionMemory: 64,
      createConnection: () => {
        const sock = unixPath === null ? net.connect(hostPort(target.target)) : net.connect({ path: unixPath });
        // Raft messages are small and latency-bound: never wait to coalesce them.
        sock.setNoDelay(true);
        return sock;
      },
    });
    this.session.on('error', (e: Error) => this.end(grpc.status.UNAVAILABLE, e.message));
    this.session.on('goaway', () => this.end(grpc.status.UNAVAILABLE, 'peer closed the connection'));
    this.session.on('close', () => this.end(grpc.status.UNAVAILABLE, 'connection closed'));
    this.session.once('connect', () => {
      this.connected = true;
    });
    this.stream = this.session.request(
      {
        ':method': 'POST',
        ':path': opts.path,
        ':scheme': 'http',
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-accept-encoding': 'identity',
        ...opts.metadata,
      },
      { endStream: false },
    );
    this.stream.on('response', (headers: http2.IncomingHttpHeaders) => {
      const status = headers['grpc-status'];
      // A trailers-only answer is a refusal (or a status) before any message.
      if (status !== undefined) this.end(Number(status), decodeGrpcMessage(headers['grpc-message']));
      else if (!this.ended) this.handlers.onAccepted();
    });
    this.stream.on('trailers', (trailers: http2.IncomingHttpHeaders) => {
      const status = trailers['grpc-status'];
      this.end(status === undefined ? grpc.status.UNKNOWN : Number(status), decodeGrpcMessage(trailers['grpc-message']));
    });
    // The peer sends no messages on this call; reading keeps the stream flowing to its end.
    this.stream.on('data', () => {});
    this.stream.on('error', (e: Error) => this.end(grpc.status.UNAVAILABLE, e.message));
    this.stream.on('close', () => this.end(grpc.status.UNAVAILABLE, 'stream closed without a status'));
    // A silent peer (paused, partitioned) must be noticed: a ping per interval, answered within
    // the next one, and a connection that never completes counts the same.
    let silentTicks = 0;
    this.keepalive = setInterval(() => {
      if (this.ended) return;
      if (!this.connected || this.pingOutstanding) {
        silentTicks++;
        if (silentTicks * opts.keepaliveTimeMs >= opts.keepaliveTimeMs + opts.keepaliveTimeoutMs) {
          this.end(grpc.status.UNAVAILABLE, 'keepalive timeout');
        }
        return;
      }
      silentTicks = 0;
      this.pingOutstanding = true;
      try {
        this.session.ping((err) => {
          if (err === null) this.pingOutstanding = false;
        });
      } catch {
        // Too many outstanding pings or a closing session: the next tick decides.
      }
    }, opts.keepaliveTimeMs);
    this.keepalive.unref();
  }

  /** Writes one gRPC-framed message (see codec.ts encodeFramedBatch); `cb` runs when the connection took it. */
  write(framed: Buffer, cb: () => void): void {
    if (this.ended) return;
    this.stream.write(framed, () => cb());
  }

  /** Ends the call from this side, as grpc-js's cancel does (reported as CANCELLED, on a later tick). */
  cancel(): void {
    this.end(grpc.status.CANCELLED, 'Cancelled on client');
  }

  private end(code: grpc.status, details: string): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.keepalive);
    if (!this.stream.destroyed) this.stream.close(http2.constants.NGHTTP2_CANCEL);
    if (!this.session.destroyed) this.session.destroy();
    const e = streamEnd(code, details);
    // Never re-enter the caller from inside its own write or cancel.
    process.nextTick(() => this.handlers.onEnded(e));
  }
}

function hostPort(target: string): { host: string; port: number } {
  const i = target.lastIndexOf(':');
  assert(i > 0, `peer target without port: ${target}`);
  let host = target.slice(0, i);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  return { host, port: Number(target.slice(i + 1)) };
}
