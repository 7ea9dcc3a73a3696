// Plain HTTP requests that arrive over HTTP/2 (curl and browsers negotiate h2 on https:// client
// URLs), served by the same handler as HTTP/1.1: /health, /version, /metrics and the JSON gateway.
// etcd serves both on one TLS port and tells them apart per request by the content-type (gRPC's
// is application/grpc); our HTTP/2 connection hands every stream to gRPC unless routed here.
import { EventEmitter } from 'node:events';
import type http from 'node:http';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import type { IncomingHeaders } from '../h2/connection';
import { ErrorCode } from '../h2/frames';
import type { OutgoingValue } from '../h2/hpack';
import type { H2Stream } from '../h2/stream';

/** Whether a stream is a gRPC call (anything else is plain HTTP). */
export function isGrpcRequest(headers: IncomingHeaders): boolean {
  const ct = headers['content-type'];
  return typeof ct === 'string' && ct.startsWith('application/grpc');
}

/** Headers that HTTP/2 forbids (RFC 9113 section 8.2.2); the HTTP/1.1 handler may set them. */
const CONNECTION_HEADERS = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

function text(v: string | string[] | undefined): string {
  return typeof v === 'string' ? v : Array.isArray(v) ? (v[0] ?? '') : '';
}

/** The request surface the HTTP handler reads, over one HTTP/2 stream. */
class H2Request extends Readable {
  readonly method: string;
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly httpVersion = '2.0';

  constructor(
    private readonly stream: H2Stream,
    headers: IncomingHeaders,
    readonly socket: Socket,
  ) {
    super();
    this.method = text(headers[':method']);
    this.url = text(headers[':path']) || '/';
    const plain: http.IncomingHttpHeaders = {};
    for (const [k, v] of Object.entries(headers)) if (!k.startsWith(':') && v !== undefined) plain[k] = v;
    const authority = text(headers[':authority']);
    if (authority !== '' && plain.host === undefined) plain.host = authority;
    this.headers = plain;
    stream.on('data', (d: Buffer) => {
      if (!this.push(d)) stream.pause();
    });
    stream.on('end', () => this.push(null));
    stream.on('close', () => {
      if (!this.readableEnded) this.destroy();
    });
  }

  override _read(): void {
    this.stream.resume();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    // A Readable destroys itself after 'end' too; only a request given up mid-body (the gateway's
    // size bound) cancels the stream, and then before any response.
    if (!this.readableEnded) this.stream.close(ErrorCode.CANCEL);
    cb(err);
  }
}

/** The response surface the HTTP handler writes, over the same stream. */
class H2Response extends EventEmitter {
  statusCode = 200;
  private readonly pending = new Map<string, OutgoingValue>();

  /** `headOnly`: a HEAD request, whose response has headers and no body (as Node's ServerResponse). */
  constructor(
    private readonly stream: H2Stream,
    private readonly headOnly: boolean,
  ) {
    super();
    stream.on('drain', () => this.emit('drain'));
    stream.on('close', () => this.emit('close'));
  }

  get headersSent(): boolean {
    return this.stream.headersSent;
  }

  get writableEnded(): boolean {
    return this.stream.writableEnded;
  }

  setHeader(name: string, value: number | string | readonly string[]): this {
    this.pending.set(name.toLowerCase(), value);
    return this;
  }

  getHeader(name: string): OutgoingValue {
    return this.pending.get(name.toLowerCase());
  }

  writeHead(status: number, headers?: http.OutgoingHttpHeaders): this {
    this.statusCode = status;
    for (const [k, v] of Object.entries(headers ?? {})) if (v !== undefined) this.setHeader(k, v);
    this.sendHeaders();
    return this;
  }

  write(chunk: string | Buffer): boolean {
    this.sendHeaders();
    if (this.headOnly) return true;
    return this.stream.write(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  }

  end(chunk?: string | Buffer): this {
    this.sendHeaders();
    if (chunk === undefined || this.headOnly) this.stream.end();
    else this.stream.end(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    return this;
  }

  destroy(): this {
    this.stream.close(ErrorCode.CANCEL);
    return this;
  }

  private sendHeaders(): void {
    if (this.stream.headersSent || this.stream.closed) return;
    const out: Record<string, OutgoingValue> = { ':status': this.statusCode };
    for (const [k, v] of this.pending) if (!CONNECTION_HEADERS.has(k)) out[k] = v;
    this.stream.respond(out);
  }
}

export type HttpRequestListener = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** Serves one HTTP/2 stream that is not a gRPC call with the HTTP/1.1 request listener. */
export function serveHttpOverH2(stream: H2Stream, headers: IncomingHeaders, listener: HttpRequestListener): void {
  const req = new H2Request(stream, headers, stream.session.socket as Socket);
  const res = new H2Response(stream, req.method === 'HEAD');
  // The listener (src/api/http.ts and the gateway) uses only what the classes above provide:
  // method, url, headers, socket and the readable side; writeHead, setHeader, write, end,
  // headersSent, destroy, 'close' and 'drain'. Tested in test/unit/tls/listener.test.ts.
  listener(req as unknown as http.IncomingMessage, res as unknown as http.ServerResponse);
}
