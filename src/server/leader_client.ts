// Calls a follower cannot answer itself go to the leader's client URL, over etcd's own services:
// a member promotion, and the lease calls (only the leader runs the lease clock) when the leader
// runs an etcd-ts that does not answer them on its peer URLs yet (src/transport/lease_forward.ts,
// where they go first, as etcd forwards them).
import * as grpc from '@grpc/grpc-js';
import { Code, EtcdError, Errors, etcdError } from '../errors';
import { clientConstructor } from '../pb/load';
import type * as pb from '../pb/types';

/** Bound on keepalives waiting for the leader's answer on one stream. */
const MAX_INFLIGHT_KEEPALIVES = 1024;

interface LeaseClient extends grpc.Client {
  LeaseTimeToLive(req: object, opts: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r?: pb.LeaseTimeToLiveResponse) => void): void;
  LeaseLeases(req: object, opts: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r?: pb.LeaseLeasesResponse) => void): void;
  LeaseKeepAlive(): grpc.ClientDuplexStream<object, pb.LeaseKeepAliveResponse>;
}

function target(url: string): string {
  const u = new URL(url);
  if (u.protocol === 'unix:') return `unix:${u.pathname}`;
  return u.host;
}

/** etcd's own error texts: the only ones a leader's answer may pass on to a client. */
const ETCD_TEXTS = new Set<string>(Object.values(Errors).map((d) => d.message));

/**
 * The leader could not be reached, or answered with something that is not one of etcd's errors
 * (grpc-js's own texts name the leader's address). Never shown to a client: the server retries
 * the forward and answers with etcd's error if it runs out of time.
 */
export class LeaderUnreachable extends Error {
  constructor(readonly grpcCode: number) {
    super('the leader could not be reached');
    this.name = 'LeaderUnreachable';
  }
}

/** What the leader's status means here: one of etcd's errors as it is, anything else unreachable. */
export function forwardedError(code: number, details: string): Error {
  if (ETCD_TEXTS.has(details)) return new EtcdError(code as EtcdError['code'], details);
  return new LeaderUnreachable(code);
}

function toEtcdError(e: grpc.ServiceError): Error {
  return forwardedError(typeof e.code === 'number' ? e.code : Code.Unavailable, e.details ?? '');
}

export class LeaderClient {
  constructor(private readonly credentials?: (secure: boolean) => grpc.ChannelCredentials) {}

  private client: LeaseClient | null = null;
  private url = '';
  private stream: grpc.ClientDuplexStream<object, pb.LeaseKeepAliveResponse> | null = null;
  private waiting: Array<{ resolve(r: pb.LeaseKeepAliveResponse): void; reject(e: Error): void }> = [];

  private cluster: { url: string; client: grpc.Client & { MemberPromote(req: object, opts: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r?: pb.MemberPromoteResponse) => void): void } } | null = null;

  /** etcd forwards a promote that reaches a follower to the leader. */
  async memberPromote(url: string, req: pb.MemberPromoteRequest, timeoutMs: number): Promise<pb.MemberPromoteResponse> {
    if (!this.cluster || this.cluster.url !== url) {
      this.cluster?.client.close();
      const Ctor = clientConstructor('etcdserverpb.Cluster');
      const secure = url.startsWith('https:') || url.startsWith('unixs:');
      const creds = this.credentials?.(secure) ?? grpc.credentials.createInsecure();
      this.cluster = { url, client: new Ctor(target(url), creds) as unknown as NonNullable<LeaderClient['cluster']>['client'] };
    }
    const c = this.cluster.client;
    return new Promise((resolve, reject) =>
      c.MemberPromote(req, { deadline: Date.now() + timeoutMs }, (e, r) => (e ? reject(toEtcdError(e)) : resolve(r as pb.MemberPromoteResponse))),
    );
  }

  private connect(url: string): LeaseClient {
    if (this.client && this.url === url) return this.client;
    this.close();
    const Ctor = clientConstructor('etcdserverpb.Lease');
    const secure = url.startsWith('https:') || url.startsWith('unixs:');
    const creds = this.credentials?.(secure) ?? grpc.credentials.createInsecure();
    this.client = new Ctor(target(url), creds) as unknown as LeaseClient;
    this.url = url;
    return this.client;
  }

  async timeToLive(url: string, req: pb.LeaseTimeToLiveRequest, timeoutMs: number): Promise<pb.LeaseTimeToLiveResponse> {
    const c = this.connect(url);
    return new Promise((resolve, reject) =>
      c.LeaseTimeToLive(req, { deadline: Date.now() + timeoutMs }, (e, r) => (e ? reject(toEtcdError(e)) : resolve(r as pb.LeaseTimeToLiveResponse))),
    );
  }

  async leases(url: string, timeoutMs: number): Promise<pb.LeaseLeasesResponse> {
    const c = this.connect(url);
    return new Promise((resolve, reject) =>
      c.LeaseLeases({}, { deadline: Date.now() + timeoutMs }, (e, r) => (e ? reject(toEtcdError(e)) : resolve(r as pb.LeaseLeasesResponse))),
    );
  }

  /** One keepalive through a long-lived stream to the leader; answers come back in order. */
  async keepAlive(url: string, id: string, timeoutMs: number): Promise<pb.LeaseKeepAliveResponse> {
    const c = this.connect(url);
    if (this.waiting.length >= MAX_INFLIGHT_KEEPALIVES) throw etcdError('RequestTooManyRequests');
    if (!this.stream) {
      const s = c.LeaseKeepAlive();
      s.on('data', (r: pb.LeaseKeepAliveResponse) => this.waiting.shift()?.resolve(r));
      const fail = (e: Error): void => {
        if (this.stream === s) this.stream = null;
        for (const w of this.waiting.splice(0)) w.reject(e instanceof Error && 'code' in e ? toEtcdError(e as grpc.ServiceError) : etcdError('Timeout'));
      };
      s.on('error', fail);
      s.on('end', () => fail(etcdError('LeaderChanged')));
      this.stream = s;
    }
    const stream = this.stream;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        // The stream's answers can no longer be matched in order: start a fresh one.
        stream.cancel();
        reject(etcdError('Timeout'));
      }, timeoutMs);
      this.waiting.push({
        resolve: (r) => {
          clearTimeout(timer);
          resolve(r);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      stream.write({ ID: id });
    });
  }

  close(): void {
    this.cluster?.client.close();
    this.cluster = null;
    this.stream?.cancel();
    this.stream = null;
    this.client?.close();
    this.client = null;
    this.url = '';
  }
}
