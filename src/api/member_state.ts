// etcd's gRPC interceptors need two facts about this member on every call: whether it is a
// learner and whether it knows a leader. EtcdServerApi exposes them through Status, so we
// keep a cached copy refreshed in the background instead of asking per request.
import * as grpc from '@grpc/grpc-js';
import { etcdError } from '../errors';
import type { EtcdServerApi } from '../server/types';
import { toGrpcError } from './errors';
import type { ApiLogger } from './types';
import { firstMetadataValue, metadataValues, type MetadataCarrier } from './call_metadata';

/** etcd's maxNoLeaderCnt: election timeouts without a leader before streams are cut. */
export const MAX_NO_LEADER_COUNT = 3;
const SNAPSHOT_METHOD = 'Snapshot';
/** Metadata the Go client sets with clientv3.WithRequireLeader. */
const REQUIRE_LEADER_KEY = 'hasleader';
/** Metadata the Go client sends on every call: its API version ("3.4", "3.5"). */
const CLIENT_API_VERSION_KEY = 'client-api-version';
/** Distinct client versions counted; a client could send any text, and each one is a series. */
const MAX_CLIENT_VERSIONS = 64;

export interface MemberStateOptions {
  /** How stale the cached Status may get before a refresh starts. */
  refreshMs?: number;
  /** The leader monitor's period: etcd uses one election timeout. */
  electionTimeoutMs?: number;
  /**
   * Calls that passed the learner check, by kind and the client's API version ("unknown" when it
   * sent none): etcd_server_client_requests_total. Called per pair with the count since the last flush.
   */
  onClientRequests?: (type: ClientCallType, version: string, count: number) => void;
}

export type ClientCallType = 'unary' | 'stream';

interface Snapshot {
  known: boolean;
  hasLeader: boolean;
  isLearner: boolean;
}

/** What the monitor needs of a server stream (writable or duplex). */
export interface StreamCall {
  readonly metadata: grpc.Metadata;
  on(event: 'close' | 'cancelled' | 'finish', listener: () => void): unknown;
  emit(event: 'error', err: unknown): boolean;
}

export class MemberState {
  private state: Snapshot = { known: false, hasLeader: true, isLearner: false };
  private fetchedAtMs = 0;
  private readonly refreshMs: number;
  private readonly electionTimeoutMs: number;
  /** Streams opened with require-leader; cut after MAX_NO_LEADER_COUNT leaderless periods. */
  private readonly leaderStreams = new Set<StreamCall>();
  private noLeaderCount = 0;
  private timer: NodeJS.Timeout | undefined;
  /**
   * Calls since the last flush per kind and client version, summed here so a call costs a header
   * read and a map update. At most MAX_CLIENT_VERSIONS versions per kind, then "other".
   */
  private readonly clientCounts: Record<ClientCallType, Map<string, number>> = { unary: new Map(), stream: new Map() };

  constructor(
    private readonly server: EtcdServerApi,
    private readonly log: ApiLogger,
    private readonly opts: MemberStateOptions = {},
  ) {
    this.refreshMs = opts.refreshMs ?? 500;
    this.electionTimeoutMs = opts.electionTimeoutMs ?? 1000;
  }

  /** The cached facts; starts a refresh when they are stale. */
  current(): Snapshot {
    if (Date.now() - this.fetchedAtMs > this.refreshMs) void this.refresh();
    return this.state;
  }

  refresh(): Promise<void> {
    try {
      const f = this.server.memberState();
      this.state = { known: true, hasLeader: f.hasLeader, isLearner: f.isLearner };
    } catch (e) {
      // Unknown state restricts nothing; the RPC itself will fail if the server is down.
      this.state = { known: false, hasLeader: true, isLearner: false };
      this.log.debug('member state refresh failed', { error: e instanceof Error ? e.message : String(e) });
    }
    this.fetchedAtMs = Date.now();
    return Promise.resolve();
  }

  /** Hands the client request counts gathered since the last flush to onClientRequests (at scrape time). */
  flushClientCounts(): void {
    const report = this.opts.onClientRequests;
    if (report === undefined) return;
    for (const type of ['unary', 'stream'] as const) {
      const counts = this.clientCounts[type];
      for (const [version, n] of counts) {
        if (n === 0) continue;
        report(type, version, n);
        counts.set(version, 0);
      }
    }
  }

  private countClient(type: ClientCallType, call: MetadataCarrier): void {
    if (this.opts.onClientRequests === undefined) return;
    const counts = this.clientCounts[type];
    let version = firstMetadataValue(call, CLIENT_API_VERSION_KEY) ?? 'unknown';
    let n = counts.get(version);
    if (n === undefined && counts.size >= MAX_CLIENT_VERSIONS) {
      version = 'other';
      n = counts.get(version);
    }
    counts.set(version, (n ?? 0) + 1);
  }

  /** etcd's unary interceptor checks; returns the error to answer with, if any. */
  checkUnary(req: unknown, method: string, call: MetadataCarrier): Error | undefined {
    const s = this.current();
    if (s.isLearner && !supportedForLearner(method, req)) return etcdError('NotSupportedForLearner');
    this.countClient('unary', call);
    if (requiresLeader(call) && !s.hasLeader) return etcdError('NoLeader');
    return undefined;
  }

  /** etcd's stream interceptor checks; registers require-leader streams for the monitor. */
  checkStream(call: StreamCall, method: string): Error | undefined {
    const s = this.current();
    if (s.isLearner && method !== SNAPSHOT_METHOD) return etcdError('NotSupportedForLearner');
    this.countClient('stream', call);
    if (requiresLeader(call)) {
      if (!s.hasLeader) return etcdError('NoLeader');
      this.leaderStreams.add(call);
      const drop = (): void => {
        this.leaderStreams.delete(call);
      };
      call.on('close', drop);
      call.on('cancelled', drop);
      call.on('finish', drop);
      this.ensureMonitor();
    }
    return undefined;
  }

  private ensureMonitor(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick(), this.electionTimeoutMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.leaderStreams.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
      this.noLeaderCount = 0;
      return;
    }
    await this.refresh();
    this.noLeaderCount = this.state.hasLeader ? 0 : this.noLeaderCount + 1;
    if (this.noLeaderCount < MAX_NO_LEADER_COUNT) return;
    // Reconnecting streams costs more than refusing new calls, hence the patience above.
    const err = toGrpcError(etcdError('NoLeader'));
    for (const call of this.leaderStreams) call.emit('error', err);
    this.leaderStreams.clear();
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.leaderStreams.clear();
  }
}

function requiresLeader(call: MetadataCarrier): boolean {
  const v = metadataValues(call, REQUIRE_LEADER_KEY);
  return v.length > 0 && String(v[0]) === 'true';
}

/** etcd lets a learner answer Status and serializable Range, nothing else. */
function supportedForLearner(method: string, req: unknown): boolean {
  if (method === 'Status') return true;
  if (method === 'Range') return Boolean((req as { serializable?: boolean }).serializable);
  return false;
}
