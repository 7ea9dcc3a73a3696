// etcd's gRPC interceptors need two facts about this member on every call: whether it is a
// learner and whether it knows a leader. EtcdServerApi exposes them through Status, so we
// keep a cached copy refreshed in the background instead of asking per request.
import * as grpc from '@grpc/grpc-js';
import { etcdError } from '../errors';
import type { EtcdServerApi } from '../server/types';
import { toGrpcError } from './errors';
import type { ApiLogger } from './types';
import { metadataValues, type MetadataCarrier } from './call_metadata';

/** etcd's maxNoLeaderCnt: election timeouts without a leader before streams are cut. */
export const MAX_NO_LEADER_COUNT = 3;
const SNAPSHOT_METHOD = 'Snapshot';
/** Metadata the Go client sets with clientv3.WithRequireLeader. */
const REQUIRE_LEADER_KEY = 'hasleader';

export interface MemberStateOptions {
  /** How stale the cached Status may get before a refresh starts. */
  refreshMs?: number;
  /** The leader monitor's period: etcd uses one election timeout. */
  electionTimeoutMs?: number;
}

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

  constructor(
    private readonly server: EtcdServerApi,
    private readonly log: ApiLogger,
    opts: MemberStateOptions = {},
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

  /** etcd's unary interceptor checks; returns the error to answer with, if any. */
  checkUnary(req: unknown, method: string, call: MetadataCarrier): Error | undefined {
    const s = this.current();
    if (s.isLearner && !supportedForLearner(method, req)) return etcdError('NotSupportedForLearner');
    if (requiresLeader(call) && !s.hasLeader) return etcdError('NoLeader');
    return undefined;
  }

  /** etcd's stream interceptor checks; registers require-leader streams for the monitor. */
  checkStream(call: StreamCall, method: string): Error | undefined {
    const s = this.current();
    if (s.isLearner && method !== SNAPSHOT_METHOD) return etcdError('NotSupportedForLearner');
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
