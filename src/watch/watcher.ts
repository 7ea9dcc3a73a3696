// One watcher: what it watches, how far it has been served, and which group holds it.
import { EventType, type MvccEvent } from '../mvcc/types';

export type WatcherState =
  /** Receives live events from notify(); has everything below minRev. */
  | 'synced'
  /** Behind: served from the store by the catch-up loop, starting at minRev. */
  | 'unsynced'
  /** Its history was compacted away; the canceled response went out; waits for cancel/close. */
  | 'compacted'
  /** Canceled or its stream closed; in no group. */
  | 'gone';

/** The stream side a watcher needs (implemented by the hub's stream). */
export interface WatcherOwner {
  readonly paused: boolean;
}

/**
 * A watched key or range as the synced group indexes it: the bytes spelled in latin1 (string order
 * is then byte order, see watcher-group.ts), a range as its two bounds joined by U+0100, which no
 * spelled byte can be.
 */
function rangeId(start: string, end: string): string {
  return `${start}\u0100${end}`;
}

export class Watcher {
  state: WatcherState;
  /**
   * `key` and `end` in latin1, and the group's index key (the key, or rangeId of the bounds):
   * spelled once, not on every move between the synced and unsynced groups (a paused stream's
   * watchers move twice per revision it misses; under etcd's benchmark fan-out, with streams
   * pausing after 16 responses per turn, the spelling was ~9% of the server's CPU).
   */
  readonly keyLatin1: string;
  readonly endLatin1: string | null;
  readonly groupId: string;
  /** The next revision this watcher has not been served (all events below it were). */
  minRev: number;
  /**
   * etcd's per-watcher progress flag: true when no event response went out since the last
   * progress tick, so the next tick sends a progress notification.
   */
  progressPending = true;

  constructor(
    readonly owner: WatcherOwner,
    readonly id: number,
    readonly key: Buffer,
    /** null: only `key`. Empty: every key >= key. Otherwise the exclusive end. */
    readonly end: Buffer | null,
    /** As requested (0: from the next revision); progress waits until the store reaches it. */
    readonly startRev: number,
    minRev: number,
    state: 'synced' | 'unsynced',
    readonly noPut: boolean,
    readonly noDelete: boolean,
    readonly prevKv: boolean,
    readonly progressNotify: boolean,
  ) {
    this.minRev = minRev;
    this.state = state;
    this.keyLatin1 = key.toString('latin1');
    this.endLatin1 = end === null ? null : end.toString('latin1');
    this.groupId = this.endLatin1 === null ? this.keyLatin1 : rangeId(this.keyLatin1, this.endLatin1);
  }

  /** False when a NOPUT/NODELETE filter drops the event. */
  accepts(ev: MvccEvent): boolean {
    if (ev.type === EventType.PUT) return !this.noPut;
    return !this.noDelete;
  }
}

/**
 * A copy of the event without prevKv for watchers that did not ask for it. The store's event
 * objects are shared by every watcher, so they are never mutated.
 */
export function withoutPrevKv(ev: MvccEvent): MvccEvent {
  return ev.prevKv === null ? ev : { type: ev.type, kv: ev.kv, prevKv: null };
}
