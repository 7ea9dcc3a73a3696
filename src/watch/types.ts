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
  events: MvccEvent[];
}

/**
 * One client watch stream (one gRPC Watch call). Created by WatchHub.openStream(sink).
 * The sink returns false when the client is not keeping up; the hub then stops pushing to
 * that stream's watchers (moves them to the unsynced group, reading from the store later)
 * until `resume()` is called, so memory stays bounded.
 */
export interface WatchStream {
  /**
   * Create a watcher. Returns the watch ID, or throws EtcdError-like {code,message}
   * when the ID is in use ("mvcc: watch id already exists" cancel response semantics are
   * decided by the adapter). The `created` response is emitted through the sink before
   * any event of this watcher.
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
