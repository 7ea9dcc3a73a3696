// The sending side towards one peer: a long-lived bidi Stream carrying MessageBatches (one write
// in flight; whatever queues meanwhile goes in the next batch), and a chunked Snapshot call, one
// at a time, for MsgSnap and oversized messages so they never hold up heartbeats. The Stream
// call goes over a plain HTTP/2 connection of our own for insecure peer URLs (raw_client.ts)
// and through grpc-js for TLS ones; the bytes on the wire are the same.
import assert from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import { performance } from 'node:perf_hooks';
import { formatGoDurationMs, hexId, type Logger } from '../log';
import { MessageType, MessageTypeName, type Message as RaftMessage } from '../raft/types';
import { FRAME_HEADER_BYTES } from '../grpcjs/wire';
import { encodeFramedBatch, encodeRaftMessage, framedSizeBytes } from './codec';
import type { TransportMetrics } from './metrics';
import type { TransportLimits } from './options';
import { channelOptions } from './options';
import {
  encodeChunk,
  identity,
  METADATA_CLUSTER_ID,
  METADATA_FROM,
  METADATA_TO,
  SNAPSHOT_PATH,
  STREAM_PATH,
} from './peer_proto';
import { RawClientStream } from './raw_client';
import { peerTarget, type PeerTarget } from './urls';

export interface SenderHooks {
  onUnreachable(id: bigint): void;
  onSnapshotStatus(id: bigint, failed: boolean): void;
  /** The peer said this member was removed from the cluster. */
  onLocalRemoved(): void;
}

interface OutgoingMessage {
  type: number;
  from: bigint;
  /** Encoded raftpb.Message. */
  buf: Buffer;
  /** Snapshot index of a MsgSnap, for logs. */
  snapshotIndex: number;
}

export interface SenderConfig {
  localId: bigint;
  clusterId: bigint;
  peerId: bigint;
  urls: readonly string[];
  log: Logger;
  hooks: SenderHooks;
  limits: TransportLimits;
  credentials: (secure: boolean) => grpc.ChannelCredentials;
  metrics: TransportMetrics;
}

/** Matches the receiver's status details (etcd's rafthttp response texts). */
export const REJECT_CLUSTER_ID_MISMATCH = 'cluster ID mismatch';
export const REJECT_REMOVED_MEMBER = 'removed member';
export const REJECT_SENDER_NOT_FOUND = 'error sender not found';
export const REJECT_TO_MISMATCH = 'to field mismatch';

/** The Stream call, whichever client carries it. */
interface StreamCall {
  /** `framed` starts with the gRPC message prefix (encodeFramedBatch). */
  write(framed: Buffer, cb: () => void): void;
  cancel(): void;
}

export class PeerSender {
  private targets: PeerTarget[];
  private urlIndex = 0;
  private client: grpc.Client | null = null;
  private call: StreamCall | null = null;
  /** The peer accepted the current stream (response headers arrived). */
  private active = false;
  /** Wall-clock ms when the peer last became active; 0 while inactive. */
  private activeSinceMs = 0;
  private writeInFlight = false;
  /** Set after a failed attempt until the next one: messages are dropped, not queued. */
  private inBackoff = false;
  private backoffMs: number;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private queue: OutgoingMessage[] = [];
  private queueHead = 0;
  private queuedBytes = 0;
  private readonly large: OutgoingMessage[] = [];
  private largeCall: grpc.ClientWritableStream<Buffer> | null = null;
  private stopped = false;

  constructor(private readonly cfg: SenderConfig) {
    this.targets = parseTargets(cfg.urls);
    this.backoffMs = cfg.limits.reconnectInitialMs;
  }

  get id(): bigint {
    return this.cfg.peerId;
  }

  isActive(): boolean {
    return this.active;
  }

  /** Epoch ms since the peer has been continuously active, or 0 (etcd's ActiveSince). */
  activeSince(): number {
    return this.activeSinceMs;
  }

  queuedCount(): number {
    return this.queue.length - this.queueHead;
  }

  start(): void {
    this.openStream();
  }

  /** Queues one message; false when it was dropped (the peer was then reported unreachable). */
  enqueue(m: RaftMessage): boolean {
    if (this.stopped) return false;
    const isSnap = m.type === MessageType.MsgSnap;
    if (this.inBackoff && !isSnap) {
      // Like etcd's pipeline against a dead peer: the send fails at once and raft hears of it.
      this.cfg.metrics.sentFailure(this.cfg.peerId);
      this.cfg.hooks.onUnreachable(this.cfg.peerId);
      return false;
    }
    const out: OutgoingMessage = {
      type: m.type,
      from: m.from,
      buf: encodeRaftMessage(m),
      snapshotIndex: isSnap && m.snapshot !== null ? m.snapshot.metadata.index : 0,
    };
    const l = this.cfg.limits;
    if (isSnap || out.buf.length > l.maxStreamMsgBytes) return this.enqueueLarge(out);
    const size = framedSizeBytes(out.buf.length);
    if (this.queuedCount() >= l.maxQueuedMsgsPerPeer || this.queuedBytes + size > l.maxQueuedBytesPerPeer) {
      this.dropFull(out);
      return false;
    }
    this.queue.push(out);
    this.queuedBytes += size;
    return true;
  }

  /** Writes the next batch unless one is in flight or there is no stream. */
  flush(): void {
    if (this.call === null || this.writeInFlight || this.queuedCount() === 0) return;
    const l = this.cfg.limits;
    const parts: Buffer[] = [];
    let bytes = 0;
    while (this.queueHead < this.queue.length && parts.length < l.maxBatchMsgs) {
      const m = this.queue[this.queueHead]!;
      const size = framedSizeBytes(m.buf.length);
      if (parts.length > 0 && bytes + size > l.maxBatchBytes) break;
      parts.push(m.buf);
      bytes += size;
      this.queueHead++;
      this.queuedBytes -= size;
    }
    this.compactQueue();
    const call = this.call;
    this.writeInFlight = true;
    const framed = encodeFramedBatch(parts);
    call.write(framed, () => {
      this.cfg.metrics.sentBytes(this.cfg.peerId, framed.length - FRAME_HEADER_BYTES);
      if (call !== this.call) return;
      this.writeInFlight = false;
      this.flush();
    });
  }

  updateUrls(urls: readonly string[]): void {
    const next = parseTargets(urls);
    const current = this.targets[this.urlIndex];
    this.targets = next;
    const keep = current !== undefined ? next.findIndex((t) => t.target === current.target && t.secure === current.secure) : -1;
    if (keep >= 0) {
      this.urlIndex = keep;
      return;
    }
    this.urlIndex = 0;
    this.closeClient();
    if (this.call !== null) this.call.cancel();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
    const call = this.call;
    this.call = null;
    call?.cancel();
    const largeCall = this.largeCall;
    this.largeCall = null;
    largeCall?.cancel();
    this.queue = [];
    this.queueHead = 0;
    this.queuedBytes = 0;
    this.large.length = 0;
    this.active = false;
    this.activeSinceMs = 0;
    this.closeClient();
  }

  // ------------------------------------------------------------------ stream

  private metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    md.set(METADATA_CLUSTER_ID, hexId(this.cfg.clusterId));
    md.set(METADATA_FROM, hexId(this.cfg.localId));
    md.set(METADATA_TO, hexId(this.cfg.peerId));
    return md;
  }

  private getClient(): grpc.Client {
    if (this.client === null) {
      const t = this.targets[this.urlIndex];
      assert(t !== undefined, 'peer without URLs');
      this.client = new grpc.Client(t.target, this.cfg.credentials(t.secure), channelOptions(this.cfg.limits));
    }
    return this.client;
  }

  private closeClient(): void {
    const c = this.client;
    this.client = null;
    c?.close();
  }

  private openStream(): void {
    if (this.stopped) return;
    assert(this.call === null);
    this.inBackoff = false;
    const t = this.targets[this.urlIndex];
    assert(t !== undefined, 'peer without URLs');
    const call = t.secure ? this.openGrpcStream() : this.openRawStream(t);
    this.call = call;
    this.flush();
  }

  private openGrpcStream(): StreamCall {
    const grpcCall = this.getClient().makeBidiStreamRequest(STREAM_PATH, identity, identity, this.metadata());
    const call: StreamCall = {
      write: (framed, cb) => grpcCall.write(framed.subarray(FRAME_HEADER_BYTES), cb),
      cancel: () => grpcCall.cancel(),
    };
    grpcCall.on('metadata', () => {
      if (call === this.call) this.markActive();
    });
    // The receiver sends no messages today; reading keeps the call flowing to its status.
    grpcCall.on('data', () => {});
    grpcCall.on('error', (err: grpc.ServiceError) => this.onStreamEnded(call, err));
    grpcCall.on('status', (s: grpc.StatusObject) => {
      if (s.code === grpc.status.OK) this.onStreamEnded(call, new Error('stream closed by remote peer'));
    });
    return call;
  }

  private openRawStream(t: PeerTarget): StreamCall {
    const l = this.cfg.limits;
    const raw: RawClientStream = new RawClientStream(
      t,
      {
        path: STREAM_PATH,
        metadata: {
          [METADATA_CLUSTER_ID]: hexId(this.cfg.clusterId),
          [METADATA_FROM]: hexId(this.cfg.localId),
          [METADATA_TO]: hexId(this.cfg.peerId),
        },
        keepaliveTimeMs: l.keepaliveTimeMs,
        keepaliveTimeoutMs: l.keepaliveTimeoutMs,
      },
      {
        onAccepted: () => {
          if (raw === this.call) this.markActive();
        },
        onEnded: (end) => this.onStreamEnded(raw, end.code === grpc.status.OK ? new Error('stream closed by remote peer') : end),
      },
    );
    return raw;
  }

  private markActive(): void {
    this.backoffMs = this.cfg.limits.reconnectInitialMs;
    if (this.active) return;
    this.active = true;
    this.activeSinceMs = Date.now();
    this.cfg.metrics.peerActive(this.cfg.peerId, true);
    this.cfg.log.info('peer became active', { 'peer-id': hexId(this.cfg.peerId) });
  }

  private onStreamEnded(call: StreamCall, err: Error): void {
    if (call !== this.call || this.stopped) return;
    this.call = null;
    this.writeInFlight = false;
    const details = (err as Partial<grpc.ServiceError>).details ?? err.message;
    this.logRejection(details, err);
    if (this.active) {
      this.active = false;
      this.activeSinceMs = 0;
      this.cfg.metrics.peerActive(this.cfg.peerId, false);
      this.cfg.log.warn('peer became inactive (message send to peer failed)', {
        'peer-id': hexId(this.cfg.peerId),
        error: err,
      });
    }
    // Whatever was queued is stale by the next attempt; raft resends after hearing of the failure.
    this.queue = [];
    this.queueHead = 0;
    this.queuedBytes = 0;
    this.cfg.metrics.sentFailure(this.cfg.peerId);
    this.cfg.hooks.onUnreachable(this.cfg.peerId);
    if (this.targets.length > 1) {
      this.urlIndex = (this.urlIndex + 1) % this.targets.length;
      this.closeClient();
    }
    this.scheduleReconnect();
  }

  private logRejection(details: string, err: Error): void {
    const base = { 'local-member-id': hexId(this.cfg.localId), 'remote-peer-id': hexId(this.cfg.peerId) };
    if (details === REJECT_CLUSTER_ID_MISMATCH) {
      this.cfg.log.warn('request sent was ignored by remote peer due to cluster ID mismatch', {
        ...base,
        'local-member-cluster-id': hexId(this.cfg.clusterId),
        error: err,
      });
    } else if (details === REJECT_REMOVED_MEMBER) {
      this.cfg.log.warn('request sent was ignored by remote peer due to local member removal', base);
      this.cfg.hooks.onLocalRemoved();
    } else if (details === REJECT_TO_MISMATCH || details === REJECT_SENDER_NOT_FOUND) {
      this.cfg.log.warn('request sent was ignored by remote peer', { ...base, error: err });
    }
  }

  private scheduleReconnect(): void {
    assert(this.reconnectTimer === null);
    this.inBackoff = true;
    // Jitter keeps members that lost each other at once from redialing in lockstep.
    const delayMs = this.backoffMs * (0.5 + Math.random() / 2);
    this.backoffMs = Math.min(this.cfg.limits.reconnectMaxMs, this.backoffMs * 2);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      this.openStream();
    }, delayMs);
    this.reconnectTimer.unref();
  }

  private dropFull(m: OutgoingMessage): void {
    this.cfg.metrics.sentFailure(this.cfg.peerId);
    this.cfg.hooks.onUnreachable(this.cfg.peerId);
    if (m.type === MessageType.MsgSnap) this.cfg.hooks.onSnapshotStatus(this.cfg.peerId, true);
    this.cfg.log.warn('dropped internal Raft message since sending buffer is full (overloaded network)', {
      'message-type': MessageTypeName[m.type] ?? String(m.type),
      'local-member-id': hexId(this.cfg.localId),
      from: hexId(m.from),
      'remote-peer-id': hexId(this.cfg.peerId),
      'remote-peer-active': this.active,
    });
  }

  private compactQueue(): void {
    if (this.queueHead === this.queue.length) {
      this.queue = [];
      this.queueHead = 0;
    } else if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.queueHead);
      this.queueHead = 0;
    }
  }

  // ------------------------------------------------------------------ large messages

  private enqueueLarge(m: OutgoingMessage): boolean {
    if (this.large.length >= this.cfg.limits.maxPendingLargePerPeer) {
      this.dropFull(m);
      return false;
    }
    this.large.push(m);
    this.pumpLarge();
    return true;
  }

  private pumpLarge(): void {
    if (this.stopped || this.largeCall !== null) return;
    const m = this.large.shift();
    if (m === undefined) return;
    const isSnap = m.type === MessageType.MsgSnap;
    const fields = {
      'local-member-id': hexId(this.cfg.localId),
      'remote-peer-id': hexId(this.cfg.peerId),
      'snapshot-index': m.snapshotIndex,
      'snapshot-size-bytes': m.buf.length,
    };
    if (isSnap) this.cfg.log.info('sending database snapshot', fields);
    const startMs = performance.now();
    const call = this.getClient().makeClientStreamRequest(
      SNAPSHOT_PATH,
      identity,
      identity,
      this.metadata(),
      (err: grpc.ServiceError | null) => {
        if (call !== this.largeCall) return;
        this.largeCall = null;
        if (err === null) {
          this.cfg.metrics.sentBytes(this.cfg.peerId, m.buf.length);
          if (isSnap) {
            this.cfg.log.info('sent database snapshot', { ...fields, took: formatGoDurationMs(performance.now() - startMs) });
            this.cfg.hooks.onSnapshotStatus(this.cfg.peerId, false);
          }
        } else {
          this.cfg.log.warn(isSnap ? 'failed to send database snapshot' : 'failed to send large Raft message', {
            ...fields,
            'message-type': MessageTypeName[m.type] ?? String(m.type),
            error: err,
          });
          this.cfg.metrics.sentFailure(this.cfg.peerId);
          this.cfg.hooks.onUnreachable(this.cfg.peerId);
          if (isSnap) this.cfg.hooks.onSnapshotStatus(this.cfg.peerId, true);
        }
        this.pumpLarge();
      },
    );
    this.largeCall = call;
    this.writeChunks(call, m.buf, 0);
  }

  private writeChunks(call: grpc.ClientWritableStream<Buffer>, buf: Buffer, offset: number): void {
    const step = this.cfg.limits.chunkBytes;
    while (offset < buf.length || offset === 0) {
      if (call !== this.largeCall) return;
      const end = Math.min(buf.length, offset + step);
      const chunk = encodeChunk({ totalBytes: offset === 0 ? buf.length : null, data: buf.subarray(offset, end) });
      const more = call.write(chunk);
      offset = end;
      if (offset >= buf.length) break;
      if (!more) {
        call.once('drain', () => this.writeChunks(call, buf, offset));
        return;
      }
    }
    call.end();
  }
}

function parseTargets(urls: readonly string[]): PeerTarget[] {
  assert(urls.length > 0, 'a peer needs at least one URL');
  return urls.map(peerTarget);
}
