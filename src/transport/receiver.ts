// The receiving side: handlers of the peer service. Every call is checked against the local
// cluster and member before anything is read, with etcd's rafthttp rejection texts.
import type * as http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { hexId, type Logger } from '../log';
import { MessageType, type Message } from '../raft/types';
import { decodeBatch, decodeRaftMessage } from './codec';
import type { TransportMetrics } from './metrics';
import type { ForwardedLeaseCalls } from './lease_forward';
import {
  decodeChunk,
  decodeLeaseId,
  EMPTY,
  encodeLeaseRenewResponse,
  encodeLeaseTimeToLiveResponse,
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
import { acceptStream, endStream, GrpcMessageReader, headerText, refuseStream } from './raw_stream';

export interface ReceiverConfig {
  localId: bigint;
  clusterId: bigint;
  log: Logger;
  maxLargeMessageBytes: number;
  isKnownPeer(id: bigint): boolean;
  isRemoved(id: bigint): boolean;
  deliver(m: Message): void;
  membersJson(): string;
  /** The leader's side of the lease calls followers forward (absent: refused as unimplemented). */
  leases?: ForwardedLeaseCalls;
  metrics: TransportMetrics;
  /** Largest gRPC message accepted on the Stream call (grpc-js's receive limit). */
  maxStreamMessageBytes: number;
}

/** One open Stream call from a peer, served by grpc-js or on the raw HTTP/2 stream. */
interface OpenStream {
  /** Ends the call: with OK, or with the given refusal. */
  close(rejection: Rejection | null): void;
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

const OK_STATUS: Rejection = { code: grpc.status.OK, details: 'OK' };

function parseHexId(s: string): bigint | null {
  return HEX_ID.test(s) ? BigInt('0x' + s) : null;
}

export class Receiver {
  /** Open Stream calls and the member each comes from (to cut a removed member off). */
  private readonly streamFrom = new Map<OpenStream, bigint>();
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
      LeaseRenew: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) =>
        this.handleLeaseCall(call, cb, async (leases) => encodeLeaseRenewResponse(await leases.renew(decodeLeaseId('peerpb.LeaseRenewRequest', call.request)))),
      LeaseTimeToLive: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) =>
        this.handleLeaseCall(call, cb, async (leases) =>
          encodeLeaseTimeToLiveResponse(await leases.timeToLive(decodeLeaseId('peerpb.LeaseTimeToLiveRequest', call.request))),
        ),
    };
  }

  /** A lease call a member forwarded: answered only to a member of this cluster, as a Raft stream. */
  private handleLeaseCall(
    call: grpc.ServerUnaryCall<Buffer, Buffer>,
    cb: grpc.sendUnaryData<Buffer>,
    answer: (leases: ForwardedLeaseCalls) => Promise<Buffer>,
  ): void {
    const from = this.check((key) => header(call.metadata, key));
    if (typeof from !== 'bigint') {
      cb(from);
      return;
    }
    const leases = this.cfg.leases;
    if (leases === undefined) {
      cb({ code: grpc.status.UNIMPLEMENTED, details: 'lease calls are not served here' });
      return;
    }
    answer(leases).then(
      (resp) => cb(null, resp),
      (e: unknown) => {
        // The leader's own errors (EtcdError: a gRPC code and etcd's text) go back as they are.
        const s = e as { code?: unknown; details?: unknown } | null;
        if (typeof s?.code === 'number' && typeof s.details === 'string') cb({ code: s.code, details: s.details });
        else cb({ code: grpc.status.INTERNAL, details: e instanceof Error ? e.message : String(e) });
      },
    );
  }

  /**
   * A member was removed: end its open streams with the "removed member" refusal, so it learns
   * of its removal (it will not get the log entry that removes it) and stops.
   */
  closeFrom(id: bigint): void {
    for (const [s, from] of [...this.streamFrom]) {
      if (from !== id) continue;
      this.streamFrom.delete(s);
      s.close({ code: grpc.status.FAILED_PRECONDITION, details: REJECT_REMOVED_MEMBER });
    }
  }

  /** Ends every incoming call; later ones are refused. */
  stop(): void {
    this.stopped = true;
    const open = [...this.streamFrom.keys()];
    this.streamFrom.clear();
    for (const s of open) s.close(null);
    for (const u of this.uploads) u.destroy();
    this.uploads.clear();
  }

  private check(get: (key: string) => string): Rejection | bigint {
    if (this.stopped) return { code: grpc.status.UNAVAILABLE, details: 'peer transport stopped' };
    const local = hexId(this.cfg.localId);
    const gcid = get(METADATA_CLUSTER_ID);
    if (gcid !== hexId(this.cfg.clusterId)) {
      this.cfg.log.warn('request cluster ID mismatch', {
        'local-member-id': local,
        'local-member-cluster-id': hexId(this.cfg.clusterId),
        'remote-peer-cluster-id': gcid,
        error: new Error(REJECT_CLUSTER_ID_MISMATCH),
      });
      return { code: grpc.status.FAILED_PRECONDITION, details: REJECT_CLUSTER_ID_MISMATCH };
    }
    const fromStr = get(METADATA_FROM);
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
    const gto = get(METADATA_TO);
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

  /** The encoded MessageBatch of one Stream message; false when it cannot be read (the call must end). */
  private receiveBatch(from: bigint, batch: Buffer): boolean {
    this.cfg.metrics.receivedBytes(from, batch.length);
    let msgs: Message[];
    try {
      msgs = decodeBatch(batch).map(decodeRaftMessage);
    } catch (e) {
      this.cfg.metrics.receivedFailure(from);
      this.cfg.log.warn('failed to unmarshal Raft message', { 'local-member-id': hexId(this.cfg.localId), error: toError(e) });
      return false;
    }
    for (const m of msgs) this.deliver(m);
    return true;
  }

  private handleStream(call: grpc.ServerDuplexStream<Buffer, Buffer>): void {
    const from = this.check((key) => header(call.metadata, key));
    if (typeof from !== 'bigint') {
      call.emit('error', from);
      return;
    }
    const open: OpenStream = {
      close: (rejection) => (rejection === null ? call.end() : call.emit('error', rejection)),
    };
    this.streamFrom.set(open, from);
    // Response headers tell the sender the stream was accepted (it then counts us as active).
    call.sendMetadata(new grpc.Metadata());
    const forget = (): void => {
      this.streamFrom.delete(open);
    };
    call.on('data', (batch: Buffer) => {
      if (this.receiveBatch(from, batch)) return;
      forget();
      call.emit('error', { code: grpc.status.INVALID_ARGUMENT, details: 'error unmarshalling raft message' });
    });
    call.on('end', () => {
      forget();
      call.end();
    });
    call.on('cancelled', forget);
    call.on('error', forget);
  }

  /**
   * The same call answered on the HTTP/2 stream itself (see raw_stream.ts): same checks, same
   * statuses and texts, same messages delivered in the same order.
   */
  handleRawStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): boolean {
    const from = this.check((key) => headerText(headers, key));
    if (typeof from !== 'bigint') {
      refuseStream(stream, from);
      return true;
    }
    const open: OpenStream = { close: (rejection) => endStream(stream, rejection ?? OK_STATUS) };
    this.streamFrom.set(open, from);
    acceptStream(stream);
    const forget = (): void => {
      this.streamFrom.delete(open);
    };
    const reader = new GrpcMessageReader(this.cfg.maxStreamMessageBytes);
    let failed = false;
    const onMessage = (batch: Buffer): void => {
      if (failed || this.receiveBatch(from, batch)) return;
      failed = true;
      forget();
      endStream(stream, { code: grpc.status.INVALID_ARGUMENT, details: 'error unmarshalling raft message' });
    };
    stream.on('data', (chunk: Buffer) => {
      if (failed) return;
      const err = reader.push(chunk, onMessage);
      if (err === null) return;
      failed = true;
      forget();
      this.cfg.metrics.receivedFailure(from);
      endStream(stream, err);
    });
    stream.on('end', () => {
      forget();
      endStream(stream, OK_STATUS);
    });
    stream.on('close', forget);
    return true;
  }

  private handleSnapshot(call: grpc.ServerReadableStream<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>): void {
    const from = this.check((key) => header(call.metadata, key));
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
