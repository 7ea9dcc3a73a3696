// The receiving side: handlers of the peer service. Every call is checked against the local
// cluster and member before anything is read, with etcd's rafthttp rejection texts.
import * as grpc from '@grpc/grpc-js';
import { hexId, type Logger } from '../log';
import { MessageType, type Message } from '../raft/types';
import { decodeBatch, decodeRaftMessage } from './codec';
import type { TransportMetrics } from './metrics';
import {
  decodeChunk,
  EMPTY,
  encodeMemberInfo,
  METADATA_CLUSTER_ID,
  METADATA_FROM,
  METADATA_TO,
} from './peer_proto';
import {
  REJECT_CLUSTER_ID_MISMATCH,
  REJECT_REMOVED_MEMBER,
  REJECT_SENDER_NOT_FOUND,
  REJECT_TO_MISMATCH,
} from './peer_sender';

export interface ReceiverConfig {
  localId: bigint;
  clusterId: bigint;
  log: Logger;
  maxLargeMessageBytes: number;
  isKnownPeer(id: bigint): boolean;
  isRemoved(id: bigint): boolean;
  deliver(m: Message): void;
  membersJson(): string;
  metrics: TransportMetrics;
}

interface Rejection {
  code: grpc.status;
  details: string;
}

const HEX_ID = /^[0-9a-fA-F]{1,16}$/;

function header(md: grpc.Metadata, key: string): string {
  const v = md.get(key)[0];
  return typeof v === 'string' ? v : '';
}

function parseHexId(s: string): bigint | null {
  return HEX_ID.test(s) ? BigInt('0x' + s) : null;
}

export class Receiver {
  private readonly streams = new Set<grpc.ServerDuplexStream<Buffer, Buffer>>();
  /** Which member each open stream comes from (to cut a removed member off). */
  private readonly streamFrom = new Map<grpc.ServerDuplexStream<Buffer, Buffer>, bigint>();
  private readonly uploads = new Set<grpc.ServerReadableStream<Buffer, Buffer>>();
  private stopped = false;

  constructor(private readonly cfg: ReceiverConfig) {}

  handlers(): grpc.UntypedServiceImplementation {
    return {
      Stream: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => this.handleStream(call),
      Snapshot: (call: grpc.ServerReadableStream<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) =>
        this.handleSnapshot(call, cb),
      MemberInfo: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) =>
        cb(null, encodeMemberInfo({ clusterId: this.cfg.clusterId, memberId: this.cfg.localId, membersJson: this.cfg.membersJson() })),
    };
  }

  /**
   * A member was removed: end its open streams with the "removed member" refusal, so it learns
   * of its removal (it will not get the log entry that removes it) and stops.
   */
  closeFrom(id: bigint): void {
    for (const [call, from] of [...this.streamFrom]) {
      if (from !== id) continue;
      this.streamFrom.delete(call);
      this.streams.delete(call);
      call.emit('error', { code: grpc.status.FAILED_PRECONDITION, details: REJECT_REMOVED_MEMBER });
    }
  }

  /** Ends every incoming call; later ones are refused. */
  stop(): void {
    this.stopped = true;
    for (const s of this.streams) s.end();
    this.streams.clear();
    for (const u of this.uploads) u.destroy();
    this.uploads.clear();
  }

  private check(md: grpc.Metadata): Rejection | bigint {
    if (this.stopped) return { code: grpc.status.UNAVAILABLE, details: 'peer transport stopped' };
    const local = hexId(this.cfg.localId);
    const gcid = header(md, METADATA_CLUSTER_ID);
    if (gcid !== hexId(this.cfg.clusterId)) {
      this.cfg.log.warn('request cluster ID mismatch', {
        'local-member-id': local,
        'local-member-cluster-id': hexId(this.cfg.clusterId),
        'remote-peer-cluster-id': gcid,
        error: new Error(REJECT_CLUSTER_ID_MISMATCH),
      });
      return { code: grpc.status.FAILED_PRECONDITION, details: REJECT_CLUSTER_ID_MISMATCH };
    }
    const fromStr = header(md, METADATA_FROM);
    const from = parseHexId(fromStr);
    if (from === null) {
      this.cfg.log.warn('failed to parse path into ID', { 'local-member-id': local, path: fromStr });
      return { code: grpc.status.NOT_FOUND, details: 'invalid from' };
    }
    if (this.cfg.isRemoved(from)) {
      this.cfg.log.warn('rejected stream from remote peer because it was removed', {
        'local-member-id': local,
        'remote-peer-id-from': hexId(from),
      });
      return { code: grpc.status.FAILED_PRECONDITION, details: REJECT_REMOVED_MEMBER };
    }
    if (!this.cfg.isKnownPeer(from)) {
      this.cfg.log.warn('failed to find remote peer in cluster', {
        'local-member-id': local,
        'remote-peer-id-from': hexId(from),
        'cluster-id': hexId(this.cfg.clusterId),
      });
      return { code: grpc.status.NOT_FOUND, details: REJECT_SENDER_NOT_FOUND };
    }
    const gto = header(md, METADATA_TO);
    if (gto !== local) {
      this.cfg.log.warn('ignored streaming request; ID mismatch', {
        'local-member-id': local,
        'remote-peer-id-header': gto,
        'remote-peer-id-from': hexId(from),
        'cluster-id': hexId(this.cfg.clusterId),
      });
      return { code: grpc.status.FAILED_PRECONDITION, details: REJECT_TO_MISMATCH };
    }
    return from;
  }

  private deliver(m: Message): void {
    try {
      this.cfg.deliver(m);
    } catch (e) {
      this.cfg.log.warn('failed to process Raft message', { 'local-member-id': hexId(this.cfg.localId), error: toError(e) });
    }
  }

  private handleStream(call: grpc.ServerDuplexStream<Buffer, Buffer>): void {
    const from = this.check(call.metadata);
    if (typeof from !== 'bigint') {
      call.emit('error', from);
      return;
    }
    this.streams.add(call);
    this.streamFrom.set(call, from);
    // Response headers tell the sender the stream was accepted (it then counts us as active).
    call.sendMetadata(new grpc.Metadata());
    const forget = (): void => {
      this.streams.delete(call);
      this.streamFrom.delete(call);
    };
    call.on('data', (batch: Buffer) => {
      this.cfg.metrics.receivedBytes(from, batch.length);
      let msgs: Message[];
      try {
        msgs = decodeBatch(batch).map(decodeRaftMessage);
      } catch (e) {
        this.cfg.metrics.receivedFailure(from);
        this.cfg.log.warn('failed to unmarshal Raft message', { 'local-member-id': hexId(this.cfg.localId), error: toError(e) });
        forget();
        call.emit('error', { code: grpc.status.INVALID_ARGUMENT, details: 'error unmarshalling raft message' });
        return;
      }
      for (const m of msgs) this.deliver(m);
    });
    call.on('end', () => {
      forget();
      call.end();
    });
    call.on('cancelled', forget);
    call.on('error', forget);
  }

  private handleSnapshot(call: grpc.ServerReadableStream<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>): void {
    const from = this.check(call.metadata);
    if (typeof from !== 'bigint') {
      cb(from);
      return;
    }
    this.uploads.add(call);
    let buf: Buffer | null = null;
    let received = 0;
    let failed = false;
    const fail = (code: grpc.status, details: string): void => {
      if (failed) return;
      failed = true;
      this.uploads.delete(call);
      this.cfg.metrics.receivedFailure(from);
      this.cfg.log.warn('failed to receive large Raft message', {
        'local-member-id': hexId(this.cfg.localId),
        'remote-snapshot-sender-id': hexId(from),
        error: new Error(details),
      });
      cb({ code, details });
    };
    call.on('data', (raw: Buffer) => {
      if (failed) return;
      let chunk;
      try {
        chunk = decodeChunk(raw);
      } catch {
        fail(grpc.status.INVALID_ARGUMENT, 'error reading raft message');
        return;
      }
      if (buf === null) {
        const total = chunk.totalBytes;
        if (total === null || total < 0) return fail(grpc.status.INVALID_ARGUMENT, 'error reading raft message');
        if (total > this.cfg.maxLargeMessageBytes) return fail(grpc.status.RESOURCE_EXHAUSTED, 'raft message too large');
        buf = Buffer.allocUnsafe(total);
      }
      if (received + chunk.data.length > buf.length) return fail(grpc.status.INVALID_ARGUMENT, 'error reading raft message');
      chunk.data.copy(buf, received);
      received += chunk.data.length;
      this.cfg.metrics.receivedBytes(from, raw.length);
    });
    call.on('end', () => {
      if (failed) return;
      this.uploads.delete(call);
      if (buf === null || received !== buf.length) return fail(grpc.status.INVALID_ARGUMENT, 'error reading raft message');
      let m: Message;
      try {
        m = decodeRaftMessage(buf);
      } catch {
        return fail(grpc.status.INVALID_ARGUMENT, 'error unmarshalling raft message');
      }
      if (m.type === MessageType.MsgSnap && m.snapshot !== null) {
        this.cfg.log.info('received and saved database snapshot', {
          'local-member-id': hexId(this.cfg.localId),
          'remote-snapshot-sender-id': hexId(from),
          'incoming-snapshot-index': m.snapshot.metadata.index,
          'incoming-snapshot-message-size-bytes': buf.length,
        });
      }
      this.deliver(m);
      cb(null, EMPTY);
    });
    call.on('error', () => {
      failed = true;
      this.uploads.delete(call);
    });
    call.on('cancelled', () => {
      failed = true;
      this.uploads.delete(call);
    });
  }
}

function toError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
