// A grpc-js client built from the etcd3 npm package's copy of etcd's rpc.proto, so tests do not
// depend on the proto files of the server under test.
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export type Msg = Record<string, unknown>;
export type ServiceName = 'KV' | 'Watch' | 'Lease' | 'Cluster' | 'Maintenance' | 'Auth';

const PROTO_PATH = path.join(__dirname, '..', '..', 'node_modules', 'etcd3', 'proto', 'rpc.proto');

let cachedPkg: grpc.GrpcObject | undefined;
function etcdserverpb(): grpc.GrpcObject {
  if (cachedPkg === undefined) {
    // keepCase: field names as in etcd's proto (and etcdctl -w json); longs as strings because
    // lease IDs and member IDs use all 64 bits.
    const def = protoLoader.loadSync(PROTO_PATH, {
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    });
    cachedPkg = grpc.loadPackageDefinition(def)['etcdserverpb'] as grpc.GrpcObject;
  }
  return cachedPkg;
}

/** gRPC error as a client sees it. */
export interface RpcError {
  code: number;
  details: string;
}

export function isRpcError(e: unknown): e is RpcError & Error {
  return typeof e === 'object' && e !== null && 'code' in e && 'details' in e;
}

type UnaryFn = (
  req: Msg,
  meta: grpc.Metadata,
  opts: grpc.CallOptions,
  cb: (err: grpc.ServiceError | null, res: Msg) => void,
) => grpc.ClientUnaryCall;
type StreamFn = (meta?: grpc.Metadata, opts?: grpc.CallOptions) => grpc.ClientDuplexStream<Msg, Msg>;
type ServerStreamFn = (req: Msg, opts?: grpc.CallOptions) => grpc.ClientReadableStream<Msg>;

function toMetadata(meta: Record<string, string> | undefined): grpc.Metadata {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(meta ?? {})) md.set(k, v);
  return md;
}

/** One channel to one endpoint with a client per etcd service. */
export class EtcdGrpc {
  private readonly clients = new Map<ServiceName, grpc.Client>();

  /** `endpoint` is `host:port` or `http://host:port`. */
  constructor(endpoint: string) {
    const target = endpoint.replace(/^https?:\/\//, '');
    const pkg = etcdserverpb();
    const channelOpts: grpc.ChannelOptions = {
      // Each EtcdGrpc gets its own connection (grpc-js otherwise shares one per target).
      'grpc.use_local_subchannel_pool': 1,
      'grpc.max_receive_message_length': 64 * 1024 * 1024,
      'grpc.max_send_message_length': 64 * 1024 * 1024,
    };
    for (const name of ['KV', 'Watch', 'Lease', 'Cluster', 'Maintenance', 'Auth'] as const) {
      const Ctor = pkg[name] as grpc.ServiceClientConstructor;
      this.clients.set(name, new Ctor(target, grpc.credentials.createInsecure(), channelOpts));
    }
  }

  /** One unary call; rejects with the gRPC error (code, details) on failure. `meta`: request metadata (e.g. `token`). */
  unary(service: ServiceName, method: string, req: Msg, deadlineMs = 10_000, meta?: Record<string, string>): Promise<Msg> {
    const client = this.client(service);
    const fn = (client as unknown as Record<string, UnaryFn>)[method];
    if (typeof fn !== 'function') throw new Error(`no method ${service}.${method}`);
    return new Promise((resolve, reject) => {
      fn.call(client, req, toMetadata(meta), { deadline: Date.now() + deadlineMs }, (err, res) => {
        if (err) reject(err);
        else resolve(res);
      });
    });
  }

  /** A bidi stream (Watch.Watch, Lease.LeaseKeepAlive). */
  bidi(service: ServiceName, method: string, deadlineMs?: number, meta?: Record<string, string>): grpc.ClientDuplexStream<Msg, Msg> {
    const client = this.client(service);
    const fn = (client as unknown as Record<string, StreamFn>)[method];
    if (typeof fn !== 'function') throw new Error(`no method ${service}.${method}`);
    const opts: grpc.CallOptions = deadlineMs === undefined ? {} : { deadline: Date.now() + deadlineMs };
    return fn.call(client, toMetadata(meta), opts);
  }

  /** A server stream (Maintenance.Snapshot). */
  serverStream(service: ServiceName, method: string, req: Msg): grpc.ClientReadableStream<Msg> {
    const client = this.client(service);
    const fn = (client as unknown as Record<string, ServerStreamFn>)[method];
    if (typeof fn !== 'function') throw new Error(`no method ${service}.${method}`);
    return fn.call(client, req);
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }

  private client(service: ServiceName): grpc.Client {
    const c = this.clients.get(service);
    if (c === undefined) throw new Error('EtcdGrpc is closed');
    return c;
  }
}

/** Collects messages from a stream so a test can wait for the n-th one (bounded buffer). */
export class StreamReader {
  private readonly msgs: Msg[] = [];
  private readonly maxBuffered: number;
  private error: Error | undefined;
  private ended = false;
  private readonly waiters = new Set<() => void>();

  constructor(stream: NodeJS.EventEmitter, maxBuffered = 10_000) {
    this.maxBuffered = maxBuffered;
    stream.on('data', (m: Msg) => {
      if (this.msgs.length >= this.maxBuffered) {
        this.error = new Error(`stream buffer over ${this.maxBuffered} messages`);
      } else {
        this.msgs.push(m);
      }
      this.wake();
    });
    stream.on('error', (e: Error) => {
      this.error = e;
      this.wake();
    });
    stream.on('end', () => {
      this.ended = true;
      this.wake();
    });
  }

  /** Resolve with the next message, or reject on error/end/timeout. */
  async next(timeoutMs = 5_000): Promise<Msg> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = this.msgs.shift();
      if (m !== undefined) return m;
      if (this.error) throw this.error;
      if (this.ended) throw new Error('stream ended');
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no stream message within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          this.waiters.delete(done);
          resolve();
        };
        const timer = setTimeout(done, left);
        this.waiters.add(done);
      });
    }
  }

  /** Messages received but not yet taken. */
  pending(): number {
    return this.msgs.length;
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }
}
