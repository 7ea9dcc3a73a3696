// Lease calls a follower forwards to the leader over the peer URLs, as etcd forwards them with
// leasehttp (POST <peer URL>/leases and /leases/internal): only the leader runs the lease clock.
// The member the client called has checked the client (etcd 3.6's checkLeaseRenew and
// checkLeaseTimeToLive); members answer each other without a user, over the connections they
// already trust for Raft (the cluster ID and member IDs of every peer call, peer TLS when set).
import * as grpc from '@grpc/grpc-js';
import { hexId } from '../log';
import { channelOptions, type TransportLimits } from './options';
import {
  decodeLeaseRenewResponse,
  decodeLeaseTimeToLiveResponse,
  encodeLeaseId,
  identity,
  LEASE_RENEW_PATH,
  LEASE_TIME_TO_LIVE_PATH,
  METADATA_CLUSTER_ID,
  METADATA_FROM,
  METADATA_TO,
  type LeaseTtl,
} from './peer_proto';
import { peerTarget } from './urls';

export type { LeaseTtl } from './peer_proto';

/**
 * What a leader answers to the lease calls forwarded to it (the server implements it). Each may
 * throw an error with a gRPC `code` and etcd's `details` (an EtcdError), which the forwarding
 * member gets as the call's status.
 */
export interface ForwardedLeaseCalls {
  /** Renews the lease; the TTL it now has, in seconds, as a decimal string. */
  renew(id: string): Promise<string>;
  /** The lease's remaining and granted TTL (remaining -1 for a lease the leader does not hold). */
  timeToLive(id: string): Promise<LeaseTtl>;
}

/** The status a forwarding member got instead of an answer: the leader's, or the channel's own. */
export class ForwardFailed extends Error {
  constructor(
    readonly code: number,
    readonly details: string,
  ) {
    super(details);
    this.name = 'ForwardFailed';
  }
}

function asForwardFailed(e: unknown): ForwardFailed {
  if (e instanceof ForwardFailed) return e;
  const s = e as Partial<grpc.ServiceError> | null;
  if (typeof s?.code === 'number' && typeof s.details === 'string') return new ForwardFailed(s.code, s.details);
  return new ForwardFailed(grpc.status.UNAVAILABLE, e instanceof Error ? e.message : String(e));
}

interface LeaseForwarderConfig {
  localId: bigint;
  clusterId: bigint;
  limits: TransportLimits;
  credentials: (secure: boolean) => grpc.ChannelCredentials;
}

/** One channel per peer URL, dialled on first use, closed when the peer goes or changes its URLs. */
export class LeaseForwarder {
  private readonly clients = new Map<string, grpc.Client>();
  private stopped = false;

  constructor(private readonly cfg: LeaseForwarderConfig) {}

  async renew(to: bigint, urls: readonly string[], id: string, timeoutMs: number): Promise<string> {
    const body = encodeLeaseId('peerpb.LeaseRenewRequest', id);
    return decodeLeaseRenewResponse(await this.call(LEASE_RENEW_PATH, to, urls, body, timeoutMs));
  }

  async timeToLive(to: bigint, urls: readonly string[], id: string, timeoutMs: number): Promise<LeaseTtl> {
    const body = encodeLeaseId('peerpb.LeaseTimeToLiveRequest', id);
    return decodeLeaseTimeToLiveResponse(await this.call(LEASE_TIME_TO_LIVE_PATH, to, urls, body, timeoutMs));
  }

  /** Drops the channels of these URLs (a peer removed, or given other URLs). */
  forget(urls: readonly string[]): void {
    for (const u of urls) {
      this.clients.get(u)?.close();
      this.clients.delete(u);
    }
  }

  stop(): void {
    this.stopped = true;
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }

  /**
   * Asks each of the peer's URLs in turn, as etcd's forwarding loop does, until one answers; a URL
   * that cannot be reached (UNAVAILABLE, DEADLINE_EXCEEDED from the channel) passes to the next.
   */
  private async call(path: string, to: bigint, urls: readonly string[], body: Buffer, timeoutMs: number): Promise<Buffer> {
    if (this.stopped) throw new ForwardFailed(grpc.status.UNAVAILABLE, 'peer transport stopped');
    const md = new grpc.Metadata();
    md.set(METADATA_CLUSTER_ID, hexId(this.cfg.clusterId));
    md.set(METADATA_FROM, hexId(this.cfg.localId));
    md.set(METADATA_TO, hexId(to));
    const deadline = Date.now() + timeoutMs;
    let last = new ForwardFailed(grpc.status.UNAVAILABLE, 'no peer URL');
    for (const url of urls) {
      try {
        return await this.unary(url, path, body, md, deadline);
      } catch (e) {
        last = asForwardFailed(e);
        if (last.code !== grpc.status.UNAVAILABLE && last.code !== grpc.status.DEADLINE_EXCEEDED) throw last;
        if (Date.now() >= deadline) break;
      }
    }
    throw last;
  }

  private unary(url: string, path: string, body: Buffer, md: grpc.Metadata, deadline: number): Promise<Buffer> {
    let client = this.clients.get(url);
    if (client === undefined) {
      const t = peerTarget(url);
      client = new grpc.Client(t.target, this.cfg.credentials(t.secure), channelOptions(this.cfg.limits));
      this.clients.set(url, client);
    }
    const c = client;
    return new Promise((resolve, reject) => {
      c.makeUnaryRequest(path, identity, identity, body, md, { deadline }, (err: grpc.ServiceError | null, resp?: Buffer) =>
        err !== null || resp === undefined ? reject(err ?? new ForwardFailed(grpc.status.INTERNAL, 'empty response')) : resolve(resp),
      );
    });
  }
}
