// Raft messages between members over gRPC on the peer URLs. One PeerSender per remote member
// (bounded queue, one long-lived stream, a separate call for snapshots); one Receiver serving
// the peer service on the caller's grpc.Server.
import assert from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import { hexId, type Logger } from '../log';
import type { Message as RaftMessage } from '../raft/types';
import { LeaseForwarder, type ForwardedLeaseCalls, type LeaseTtl } from './lease_forward';
import { NO_METRICS, type TransportMetrics } from './metrics';
import { DEFAULT_LIMITS, GRPC_MAX_RECEIVE_BYTES, type TransportLimits } from './options';
import { PEER_SERVICE, STREAM_PATH } from './peer_proto';
import { PeerSender } from './peer_sender';
import { PeerProber } from './prober';
import { installRawStreamHandler } from './raw_stream';
import { Receiver } from './receiver';
import { defaultCredentials } from './urls';
import { nextTurn } from '../runtime/next_turn';

export interface PeerTransportOptions {
  memberId: bigint;
  clusterId: bigint;
  /** Every message received from a peer, in arrival order per stream. Must not throw. */
  onMessage(m: RaftMessage): void;
  /** raft's ReportUnreachable: a message to this peer was dropped or its stream failed. */
  onPeerUnreachable?(id: bigint): void;
  /** raft's ReportSnapshot: a MsgSnap was delivered (failed=false) or lost (failed=true). */
  onSnapshotStatus?(id: bigint, failed: boolean): void;
  /** A peer refused us because this member was removed from the cluster. */
  onRemovedFromCluster?(): void;
  /** Members removed from the cluster; their streams are refused ("removed member"). */
  isMemberRemoved?(id: bigint): boolean;
  /** The member list as JSON, served by the MemberInfo RPC (for joining members). */
  membersJson?(): string;
  /** Answers the lease calls other members forward to this one when it leads. */
  leases?: ForwardedLeaseCalls;
  log: Logger;
  /** Bound of each peer's stream queue; when full the message is dropped and the peer reported unreachable. */
  maxQueuedMsgsPerPeer?: number;
  /** Any other bound or timing (tests shrink them). */
  limits?: Partial<TransportLimits>;
  /** Peer network metrics (etcd_network_*); none by default. */
  metrics?: TransportMetrics;
  /** Channel credentials per peer URL scheme (https/unixs are `secure`); default insecure / system TLS roots. */
  credentials?(secure: boolean): grpc.ChannelCredentials;
}

export class PeerTransport {
  private readonly peers = new Map<bigint, PeerSender>();
  /** Round-trip probing per peer (etcd's probers); same keys as `peers`. */
  private readonly probers = new Map<bigint, PeerProber>();
  private readonly receiver: Receiver;
  /** Each peer's URLs, for the calls other than the Raft stream (forwarded lease calls). */
  private readonly peerUrls = new Map<bigint, readonly string[]>();
  private readonly leaseForwarder: LeaseForwarder;
  private readonly limits: TransportLimits;
  private readonly log: Logger;
  private stopped = false;

  constructor(private readonly opts: PeerTransportOptions) {
    this.limits = { ...DEFAULT_LIMITS, ...opts.limits };
    if (opts.maxQueuedMsgsPerPeer !== undefined) this.limits.maxQueuedMsgsPerPeer = opts.maxQueuedMsgsPerPeer;
    assert(this.limits.maxQueuedMsgsPerPeer > 0 && this.limits.maxQueuedBytesPerPeer > 0);
    assert(this.limits.chunkBytes > 0 && this.limits.maxBatchBytes > 0 && this.limits.maxBatchMsgs > 0);
    const l = this.limits;
    assert(l.proberIntervalMs > 0 && l.proberTimeoutMs > 0 && l.proberStatusMonitorIntervalMs > 0 && l.proberStatusErrorIntervalMs > 0);
    assert(opts.memberId !== 0n, 'member ID must be set');
    this.log = opts.log;
    this.receiver = new Receiver({
      localId: opts.memberId,
      clusterId: opts.clusterId,
      log: opts.log,
      maxLargeMessageBytes: this.limits.maxLargeMessageBytes,
      isKnownPeer: (id) => this.peers.has(id),
      isRemoved: (id) => opts.isMemberRemoved?.(id) ?? false,
      deliver: (m) => {
        if (m.to !== opts.memberId) {
          this.log.debug('ignored Raft message to another member', { to: hexId(m.to), 'local-member-id': hexId(opts.memberId) });
          return;
        }
        opts.onMessage(m);
      },
      membersJson: () => opts.membersJson?.() ?? '[]',
      leases: opts.leases,
      metrics: opts.metrics ?? NO_METRICS,
      maxStreamMessageBytes: GRPC_MAX_RECEIVE_BYTES,
    });
    this.leaseForwarder = new LeaseForwarder({
      localId: opts.memberId,
      clusterId: opts.clusterId,
      limits: this.limits,
      credentials: opts.credentials ?? defaultCredentials,
    });
  }

  /**
   * Adds the peer service to a grpc.Server the caller owns, binds and shuts down. Call it before
   * the server binds: the Stream call is then answered on the HTTP/2 stream directly.
   */
  register(server: grpc.Server): void {
    server.addService(PEER_SERVICE, this.receiver.handlers());
    installRawStreamHandler(server, STREAM_PATH, (stream, headers) => this.receiver.handleRawStream(stream, headers));
  }

  addPeer(id: bigint, urls: string[]): void {
    if (this.stopped || id === this.opts.memberId || this.peers.has(id)) return;
    const sender = new PeerSender({
      localId: this.opts.memberId,
      clusterId: this.opts.clusterId,
      peerId: id,
      urls,
      log: this.log,
      limits: this.limits,
      credentials: this.opts.credentials ?? defaultCredentials,
      metrics: this.opts.metrics ?? NO_METRICS,
      hooks: {
        onUnreachable: (peer) => this.opts.onPeerUnreachable?.(peer),
        onSnapshotStatus: (peer, failed) => this.opts.onSnapshotStatus?.(peer, failed),
        onLocalRemoved: () => this.opts.onRemovedFromCluster?.(),
      },
    });
    this.peers.set(id, sender);
    this.peerUrls.set(id, [...urls]);
    sender.start();
    this.startProber(id, urls);
    this.metrics.knownPeer?.(id, true);
    this.log.info('added remote peer', {
      'local-member-id': hexId(this.opts.memberId),
      'remote-peer-id': hexId(id),
      'remote-peer-urls': urls,
    });
  }

  updatePeer(id: bigint, urls: string[]): void {
    const p = this.peers.get(id);
    if (p === undefined) return;
    p.updateUrls(urls);
    this.leaseForwarder.forget(this.peerUrls.get(id) ?? []);
    this.peerUrls.set(id, [...urls]);
    // etcd removes the peer from its probers and adds it again with the new URLs.
    this.probers.get(id)?.stop();
    this.startProber(id, urls);
    this.log.info('updated remote peer', {
      'local-member-id': hexId(this.opts.memberId),
      'remote-peer-id': hexId(id),
      'remote-peer-urls': urls,
    });
  }

  removePeer(id: bigint): void {
    const p = this.peers.get(id);
    if (p === undefined) return;
    this.peers.delete(id);
    this.leaseForwarder.forget(this.peerUrls.get(id) ?? []);
    this.peerUrls.delete(id);
    p.stop();
    this.probers.get(id)?.stop();
    this.probers.delete(id);
    this.metrics.knownPeer?.(id, false);
    this.receiver.closeFrom(id);
    this.log.info('removed remote peer', { 'local-member-id': hexId(this.opts.memberId), 'removed-remote-peer-id': hexId(id) });
  }

  private get metrics(): TransportMetrics {
    return this.opts.metrics ?? NO_METRICS;
  }

  private startProber(id: bigint, urls: string[]): void {
    const prober = new PeerProber({
      peerId: id,
      urls,
      log: this.log,
      limits: this.limits,
      credentials: this.opts.credentials ?? defaultCredentials,
      metrics: this.metrics,
    });
    this.probers.set(id, prober);
    prober.start();
  }

  hasPeer(id: bigint): boolean {
    return this.peers.has(id);
  }

  /** Non-blocking: queues per peer and starts writes; a slow or dead peer only loses its own messages. */
  send(msgs: readonly RaftMessage[]): void {
    if (this.stopped) return;
    const touched = new Set<PeerSender>();
    for (const m of msgs) {
      if (m.to === 0n) continue;
      const p = this.peers.get(m.to);
      if (p === undefined) {
        this.log.debug('ignored message send request; unknown remote peer target', {
          type: m.type,
          'unknown-target-peer-id': hexId(m.to),
        });
        continue;
      }
      p.enqueue(m);
      touched.add(p);
    }
    for (const p of touched) p.flush();
  }

  /**
   * etcd's leasehttp.RenewHTTP: a renewal asked of the leader `to` over its peer URLs; its TTL.
   * Fails with a ForwardFailed: the leader's status (etcd's text) or the channel's.
   */
  forwardLeaseRenew(to: bigint, id: string, timeoutMs: number): Promise<string> {
    return this.leaseForwarder.renew(to, this.peerUrls.get(to) ?? [], id, timeoutMs);
  }

  /** etcd's leasehttp.TimeToLiveHTTP, without the keys (the member asking reads those itself). */
  forwardLeaseTimeToLive(to: bigint, id: string, timeoutMs: number): Promise<LeaseTtl> {
    return this.leaseForwarder.timeToLive(to, this.peerUrls.get(to) ?? [], id, timeoutMs);
  }

  /** Peers whose stream is currently accepted (etcd's ActivePeers). */
  activePeers(): number {
    let n = 0;
    for (const p of this.peers.values()) if (p.isActive()) n++;
    return n;
  }

  isPeerActive(id: bigint): boolean {
    return this.peers.get(id)?.isActive() ?? false;
  }

  /** Epoch ms since when the peer has been continuously active; 0 if inactive or unknown (etcd's ActiveSince). */
  activeSince(id: bigint): number {
    return this.peers.get(id)?.activeSince() ?? 0;
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const p of this.peers.values()) p.stop();
    this.peers.clear();
    for (const p of this.probers.values()) p.stop();
    this.probers.clear();
    this.leaseForwarder.stop();
    this.receiver.stop();
    // Lets cancelled calls settle before the caller shuts its server down.
    await nextTurn();
  }
}
