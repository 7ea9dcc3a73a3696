// The contract between the watch hub (src/watch) and the gRPC Watch adapter (src/api).
import type { MvccEvent } from '../mvcc/types';

export const WatchFilter = { NOPUT: 0, NODELETE: 1 } as const;

export interface WatchCreateParams {
  key: Buffer;
  /** Empty: just `key`. "\0": every key >= key. Otherwise [key, rangeEnd). */
  rangeEnd: Buffer;
  /** 0 means "from the next revision". */
  startRevision: number;
  /** Values of WatchFilter. */
  filters: number[];
  prevKv: boolean;
  progressNotify: boolean;
  fragment: boolean;
  /** 0 (AutoWatchID) lets the hub choose; otherwise the client's ID. */
  watchId: number;
}

/** What the hub hands to the stream; the API turns it into a WatchResponse. */
export interface WatchStreamEvent {
  watchId: number;
  /** Revision for the response header. */
  headerRevision: number;
  created: boolean;
  canceled: boolean;
  compactRevision: number;
  cancelReason: string;
  /** True on every response of a fragmented batch except the last one. */
  fragment: boolean;
  /** Shared between the watchers of one revision: read it, never change it. */
  events: readonly MvccEvent[];
}

/**
 * One client watch stream (one gRPC Watch call). Created by WatchHub.openStream(sink).
 * The sink returns false when the client is not keeping up; the hub then stops pushing to
 * that stream's watchers (moves them to the unsynced group, reading from the store later)
 * until `resume()` is called, so memory stays bounded.
 */
export interface WatchStream {
  /**
   * Create a watcher. The `created` response is emitted through the sink before any event of
   * this watcher. (Hub note: refused requests -- duplicate client-chosen ID, key >= range_end,
   * negative start_revision -- do not throw: the hub emits etcd's own answer, a response with
   * watch_id -1, created and canceled set and etcd's cancel_reason (WatchCancelReason).
   * WatchHub's implementation returns the watch ID, or -1 when refused.)
   */
  create(params: WatchCreateParams): void;
  /** Cancel a watcher; emits a canceled response. False when the ID is unknown. */
  cancel(watchId: number): boolean;
  /** Progress request: answered once with watch_id -1 when all watchers are synced. */
  requestProgress(): void;
  /** The sink drained; push again. */
  resume(): void;
  /** The client went away: drop every watcher of this stream. */
  close(): void;
}

export type WatchSink = (event: WatchStreamEvent) => boolean;

// ---- Added by the watch hub (src/watch/watch-hub.ts) ----------------------------------------

/** WatchCreateRequest.watch_id 0: the hub picks the ID (etcd's AutoWatchID). */
export const AUTO_WATCH_ID = 0;
/** The watch_id of responses not tied to one watcher (etcd's clientv3.InvalidWatchID). */
export const INVALID_WATCH_ID = -1;

/** cancel_reason texts etcd puts in a created+canceled response (watch_id -1). */
export const WatchCancelReason = {
  /** A client-chosen ID already in use on this stream (etcd's mvcc.ErrWatcherDuplicateID). */
  DuplicateId: 'mvcc: duplicate watch ID provided on the WatchStream',
  /** key >= range_end (etcd's mvcc.ErrEmptyWatcherRange). */
  EmptyRange: 'mvcc: watcher range is empty',
  /** start_revision < 0 (etcd 3.6 answers with rpctypes.ErrCompacted's text). */
  NegativeRevision: 'etcdserver: mvcc: required revision has been compacted',
} as const;

/**
 * What the watch hub needs from the MVCC store (the store implements it).
 * Revisions are the store's main revisions.
 */
export interface WatchableStore {
  currentRevision(): number;
  compactRevision(): number;
  /**
   * Events with fromRev <= revision <= toRev in revision order (within a revision, in the
   * order the write produced them), at most about maxEvents but never splitting a revision.
   * `nextRev` is the first revision not returned (toRev + 1 when everything was returned).
   * DELETE events carry kv = { key, modRevision: deleting revision } as in MvccEvent.
   * prevKv is filled only when withPrevKv. Throws etcdError('Compacted') when fromRev's
   * history has been compacted away.
   */
  eventsInRange(
    fromRev: number,
    toRev: number,
    maxEvents: number,
    withPrevKv: boolean,
  ): { events: MvccEvent[]; nextRev: number };
}
