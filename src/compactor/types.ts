// Contracts between the auto-compactors and the server that owns them.
import type { Logger } from '../log';
import type { CompactorClock } from './clock';

/** What the compactor calls: the server's Compact RPC path (proposed through Raft). */
export interface Compactable {
  compact(req: { revision: string; physical: boolean }): Promise<unknown>;
}

/** The store's current (latest) revision. */
export interface RevGetter {
  currentRevision(): number;
}

export interface Compactor {
  /** Starts the background schedule; call once. */
  run(): void;
  /** Keeps sampling but skips compactions (a follower; etcd calls it on losing leadership). */
  pause(): void;
  resume(): void;
  /** Halts the schedule for good; an in-flight compaction is left to finish. */
  stop(): void;
}

export type CompactionMode = 'periodic' | 'revision';

export interface CompactorOptions {
  /** `--auto-compaction-retention` as a duration (periodic mode). */
  retentionMs: number;
  /** `--auto-compaction-retention` as a revision count (revision mode). */
  retentionRevisions: number;
  target: Compactable;
  revs: RevGetter;
  log: Logger;
  clock?: CompactorClock;
}
