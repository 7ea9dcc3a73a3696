// The watch hub: every watcher of every client stream, fed from committed writes.
// Modelled on etcd's mvcc/watchable_store.go and v3rpc/watch.go (3.5/3.6 behaviour):
// - synced watchers get each revision's events from notify() as it commits;
// - unsynced watchers (a past start revision, or a stream that stopped reading) are caught up
//   from the store in bounded batches, one batch per event-loop turn, then join the synced group;
// - a watcher whose next revision was compacted gets a compact_revision + canceled response;
// - progress: per-watcher notifications every progressNotifyIntervalMs for quiet watchers that
//   asked, and stream-wide answers (watch_id -1) to progress requests once every watcher of
//   the stream is synced.
// The hub keeps no event buffers: a watcher that cannot be served now only remembers its next
// revision and is served from the store later, so memory per stream is O(watchers).
//
// The hub's notion of "current revision" is the last revision passed to notify() (seeded from
// the store at construction): every event up to it has been offered to synced watchers, so
// headers and progress notifications never announce a revision whose events are still on
// their way.
import assert from 'node:assert';
import { isEtcdError } from '../errors';
import type { MvccEvent } from '../mvcc/types';
import {
  AUTO_WATCH_ID,
  INVALID_WATCH_ID,
  WatchCancelReason,
  WatchFilter,
  type WatchCreateParams,
  type WatchSink,
  type WatchStream,
  type WatchStreamEvent,
  type WatchableStore,
} from './types';
import { Watcher, withoutPrevKv } from './watcher';
import { WatcherGroup } from './watcher-group';

export interface WatchHubOptions {
  /** How often quiet watchers that asked for progress_notify get one (etcd: 10 min). */
  progressNotifyIntervalMs: number;
  /** Events read from the store per catch-up batch (a revision is never split). Default 1000. */
  maxEventsPerResponse?: number;
  /**
   * A catch-up response is cut (between revisions) once its events reach about this many bytes,
   * so replaying large values does not produce messages beyond a client's receive limit
   * (grpc-js clients default to 4 MiB). Live responses hold exactly one revision and are
   * never cut. Default 1.5 MiB (etcd's default --max-request-bytes).
   */
  maxCatchUpResponseBytes?: number;
  /** Unsynced watchers served per catch-up batch (etcd's maxWatchersPerSync). Default 512. */
  maxWatchersPerSync?: number;
  /** Timer for progress notifications; tests inject fakes. Default setTimeout (unref'd). */
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
  /** Runs one catch-up batch on a later turn. Default setImmediate. */
  schedule?: (fn: () => void) => void;
  /**
   * A sink threw. The hub closes that stream (its watchers are dropped) so one broken client
   * cannot break notify() for everyone (notify runs inside the apply path). Default: ignore.
   */
  onSinkError?: (err: unknown) => void;
}

/** The hub's stream: WatchStream whose create() also returns the watch ID (-1 when refused). */
export interface HubWatchStream extends WatchStream {
  create(params: WatchCreateParams): number;
}

function defaultSetTimer(fn: () => void, ms: number): unknown {
  const t = setTimeout(fn, ms);
  t.unref();
  return t;
}
function defaultClearTimer(handle: unknown): void {
  clearTimeout(handle as NodeJS.Timeout);
}

// Fields copied one by one: an object literal ending in `...extra` gets a slow layout in V8
// (every later read of it was ~15x slower), and each live event builds one per watcher.
function response(watchId: number, headerRevision: number, extra: Partial<WatchStreamEvent> = {}): WatchStreamEvent {
  return {
    watchId,
    headerRevision,
    created: extra.created ?? false,
    canceled: extra.canceled ?? false,
    compactRevision: extra.compactRevision ?? 0,
    cancelReason: extra.cancelReason ?? '',
    fragment: extra.fragment ?? false,
    events: extra.events ?? [],
  };
}

/** Rough encoded size of an event: its bytes plus a fixed allowance for the other fields. */
function eventBytes(ev: MvccEvent): number {
  let n = 48 + ev.kv.key.length + ev.kv.value.length;
  if (ev.prevKv !== null) n += 48 + ev.prevKv.key.length + ev.prevKv.value.length;
  return n;
}

/**
 * Cuts events (in revision order) into runs of about maxBytes, only between revisions: a
 * single revision larger than maxBytes stays whole. Always returns at least one chunk when
 * there are events, none when there are none.
 */
export function splitAtRevisions(events: MvccEvent[], maxBytes: number): MvccEvent[][] {
  const chunks: MvccEvent[][] = [];
  let chunk: MvccEvent[] = [];
  let chunkBytes = 0;
  let i = 0;
  while (i < events.length) {
    const rev = events[i].kv.modRevision;
    let j = i;
    let revBytes = 0;
    while (j < events.length && events[j].kv.modRevision === rev) revBytes += eventBytes(events[j++]);
    if (chunk.length > 0 && chunkBytes + revBytes > maxBytes) {
      chunks.push(chunk);
      chunk = [];
      chunkBytes = 0;
    }
    for (let k = i; k < j; k++) chunk.push(events[k]);
    chunkBytes += revBytes;
    i = j;
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

export class WatchHub {
  private readonly store: WatchableStore;
  private readonly progressIntervalMs: number;
  private readonly maxEventsPerBatch: number;
  private readonly maxWatchersPerSync: number;
  private readonly maxCatchUpResponseBytes: number;
  private readonly setTimer: (fn: () => void, ms: number) => unknown;
  private readonly clearTimer: (handle: unknown) => void;
  private readonly schedule: (fn: () => void) => void;
  /** @internal */
  readonly onSinkError: (err: unknown) => void;

  /** Last revision notified (or the store's revision at start / restore). */
  private rev: number;
  private readonly synced = new WatcherGroup();
  private readonly unsynced = new Set<Watcher>();
  private readonly progressWatchers = new Set<Watcher>();
  private readonly streams = new Set<HubStream>();
  /** Events handed to the streams' sinks since start (etcd_debugging_mvcc_events_total). */
  eventsSent = 0;
  /** Streams with a deferred progress request. */
  private readonly progressWaiting = new Set<HubStream>();
  private syncScheduled = false;
  private progressTimer: unknown = undefined;
  private closed = false;

  constructor(store: WatchableStore, opts: WatchHubOptions) {
    assert(opts.progressNotifyIntervalMs > 0, 'progressNotifyIntervalMs must be > 0');
    this.store = store;
    this.progressIntervalMs = opts.progressNotifyIntervalMs;
    this.maxEventsPerBatch = opts.maxEventsPerResponse ?? 1000;
    this.maxWatchersPerSync = opts.maxWatchersPerSync ?? 512;
    this.maxCatchUpResponseBytes = opts.maxCatchUpResponseBytes ?? 1.5 * 1024 * 1024;
    assert(this.maxCatchUpResponseBytes > 0);
    assert(this.maxEventsPerBatch >= 1 && this.maxWatchersPerSync >= 1);
    this.setTimer = opts.setTimer ?? defaultSetTimer;
    this.clearTimer = opts.clearTimer ?? defaultClearTimer;
    this.schedule = opts.schedule ?? ((fn) => void setImmediate(fn));
    this.onSinkError = opts.onSinkError ?? (() => undefined);
    this.rev = store.currentRevision();
    assert(Number.isSafeInteger(this.rev));
    this.armProgressTimer();
  }

  /** The revision the hub has delivered up to (what headers carry). */
  currentRevision(): number {
    return this.rev;
  }

  /** Watchers (synced or catching up) that asked for prev_kv. */
  private prevKvWatchers = 0;

  /**
   * Whether live events must carry prev_kv: some watcher in either set asked for it. (One that
   * catches up reads its events, prev_kv included, from the store; counting it too keeps this
   * true across its move to the synced set.)
   */
  wantsPrevKv(): boolean {
    return this.prevKvWatchers > 0;
  }

  private forgetPrevKv(w: Watcher): void {
    if (!w.prevKv) return;
    this.prevKvWatchers--;
    if (this.prevKvWatchers < 0) assert.fail('more prev_kv watchers left than came');
  }

  /**
   * The events of one committed revision (prevKv filled by the store while wantsPrevKv()). Call
   * once per revision, in order, after the write is readable through eventsInRange. A revision at
   * or below one already notified is ignored.
   */
  notify(events: MvccEvent[], rev: number): void {
    assert(Number.isSafeInteger(rev));
    if (this.closed || rev <= this.rev) return;
    this.rev = rev;
    if (this.synced.size > 0 && events.length === 1) {
      this.notifyOne(events[0], rev);
    } else if (this.synced.size > 0 && events.length > 0) {
      const batches = new Map<Watcher, MvccEvent[]>();
      let stripped: Array<MvccEvent | undefined> | undefined;
      for (let i = 0; i < events.length; i++) {
        const ev = events[i];
        assert.strictEqual(ev.kv.modRevision, rev, 'notify: event of another revision');
        this.synced.forEachMatching(ev.kv.key, (w) => {
          if (rev < w.minRev || !w.accepts(ev)) return;
          let out = ev;
          if (!w.prevKv && ev.prevKv !== null) {
            stripped ??= new Array<MvccEvent | undefined>(events.length);
            out = stripped[i] ??= withoutPrevKv(ev);
          }
          const list = batches.get(w);
          if (list === undefined) batches.set(w, [out]);
          else list.push(out);
        });
      }
      for (const [w, evs] of batches) this.deliverLive(w, evs, rev);
    }
    this.answerWaitingProgress();
  }

  /**
   * notify() for a revision of one event, most writes: the watchers that take it share one frozen
   * array of it (and one of it without prev_kv), instead of a list and a map entry per watcher.
   * Collected first and delivered after, as notify() does: a delivery can move a watcher.
   */
  private notifyOne(ev: MvccEvent, rev: number): void {
    assert.strictEqual(ev.kv.modRevision, rev, 'notify: event of another revision');
    const takers: Watcher[] = [];
    this.synced.forEachMatching(ev.kv.key, (w) => {
      if (rev >= w.minRev && w.accepts(ev)) takers.push(w);
    });
    if (takers.length === 0) return;
    const whole: readonly MvccEvent[] = Object.freeze([ev]);
    let stripped: readonly MvccEvent[] | undefined;
    for (const w of takers) {
      if (!w.prevKv && ev.prevKv !== null) this.deliverLive(w, (stripped ??= Object.freeze([withoutPrevKv(ev)])), rev);
      else this.deliverLive(w, whole, rev);
    }
  }

  openStream(sink: WatchSink): HubWatchStream {
    assert(!this.closed, 'watch hub is closed');
    const s = new HubStream(this, sink);
    this.streams.add(s);
    return s;
  }

  /** Open watch streams (etcd_debugging_mvcc_watch_stream_total). */
  streamCount(): number {
    return this.streams.size;
  }

  watcherCount(): number {
    return this.synced.size + this.unsynced.size;
  }

  /** Watchers behind the store (etcd's slow_watcher_total). */
  slowWatcherCount(): number {
    return this.unsynced.size;
  }

  /**
   * After the store was replaced by a snapshot: every synced watcher is re-served from the new
   * store state (etcd's watchableStore.Restore).
   */
  restore(): void {
    this.rev = this.store.currentRevision();
    const all = [...this.synced.all()];
    for (const w of all) {
      this.synced.delete(w);
      w.state = 'unsynced';
      this.unsynced.add(w);
    }
    this.scheduleSync();
  }

  close(): void {
    if (this.closed) return;
    for (const s of [...this.streams]) s.close();
    this.closed = true;
    if (this.progressTimer !== undefined) this.clearTimer(this.progressTimer);
    this.progressTimer = undefined;
  }

  /** One progress tick (the timer calls it; exposed for tests). */
  progressTick(): void {
    for (const w of [...this.progressWatchers]) {
      if (w.progressPending && w.state === 'synced' && !w.owner.paused && this.rev >= w.startRev) {
        (w.owner as HubStream).emit(response(w.id, this.rev));
      }
      w.progressPending = true;
    }
  }

  // ---- used by HubStream -------------------------------------------------------------------

  /** @internal */
  createWatcher(stream: HubStream, id: number, p: WatchCreateParams, key: Buffer, end: Buffer | null): Watcher {
    const start = p.startRevision;
    const synced = start === 0 || start > this.rev;
    const minRev = synced ? Math.max(this.rev + 1, start) : start;
    const w = new Watcher(
      stream,
      id,
      key,
      end,
      start,
      minRev,
      synced ? 'synced' : 'unsynced',
      p.filters.includes(WatchFilter.NOPUT),
      p.filters.includes(WatchFilter.NODELETE),
      p.prevKv,
      p.progressNotify,
    );
    if (synced) this.synced.add(w);
    else this.unsynced.add(w);
    if (w.progressNotify) this.progressWatchers.add(w);
    if (w.prevKv) this.prevKvWatchers++;
    return w;
  }

  /** @internal */
  startCatchUp(): void {
    if (this.unsynced.size > 0) this.scheduleSync();
  }

  /** @internal */
  dropWatcher(w: Watcher): void {
    // A compacted watcher (or one dropped before) left both sets, and the prev_kv count, then.
    const counted = w.state === 'synced' || w.state === 'unsynced';
    if (w.state === 'synced') assert(this.synced.delete(w));
    else if (w.state === 'unsynced') assert(this.unsynced.delete(w));
    this.progressWatchers.delete(w);
    w.state = 'gone';
    if (counted) this.forgetPrevKv(w);
  }

  /** @internal */
  streamClosed(s: HubStream): void {
    this.streams.delete(s);
    this.progressWaiting.delete(s);
  }

  /** @internal */
  waitForProgress(s: HubStream): void {
    this.progressWaiting.add(s);
    this.answerWaitingProgress();
  }

  /** @internal */
  progressAnswered(s: HubStream): void {
    this.progressWaiting.delete(s);
  }

  /** @internal True when every live watcher of the stream is synced and at its start revision. */
  streamInSync(watchers: Iterable<Watcher>): boolean {
    for (const w of watchers) {
      if (w.state === 'compacted' || w.state === 'gone') continue;
      if (w.state !== 'synced' || this.rev < w.startRev) return false;
    }
    return true;
  }

  // ---- internals -----------------------------------------------------------------------------

  private deliverLive(w: Watcher, evs: readonly MvccEvent[], rev: number): void {
    if (w.state !== 'synced') return; // canceled by a sink call earlier in this notify
    const stream = w.owner as HubStream;
    if (stream.paused) {
      // The client is not reading: stop pushing, serve this and later revisions from the store.
      assert(this.synced.delete(w));
      w.state = 'unsynced';
      w.minRev = rev;
      this.unsynced.add(w);
      return;
    }
    w.minRev = rev + 1;
    w.progressPending = false;
    stream.emit(response(w.id, rev, { events: evs }));
  }

  private answerWaitingProgress(): void {
    if (this.progressWaiting.size === 0) return;
    for (const s of [...this.progressWaiting]) s.tryAnswerProgress();
  }

  private armProgressTimer(): void {
    this.progressTimer = this.setTimer(() => {
      if (this.closed) return;
      this.progressTick();
      this.armProgressTimer();
    }, this.progressIntervalMs);
  }

  private scheduleSync(): void {
    if (this.syncScheduled || this.closed) return;
    this.syncScheduled = true;
    this.schedule(() => {
      this.syncScheduled = false;
      if (!this.closed) this.syncBatch();
    });
  }

  /** One catch-up batch: one store read serving up to maxWatchersPerSync unsynced watchers. */
  private syncBatch(): void {
    const cur = this.rev;
    const compactRev = this.store.compactRevision();
    const batch: Watcher[] = [];
    const touched = new Set<HubStream>();
    // Deleting while iterating a Set is safe; a watcher added meanwhile (a sink reacting
    // synchronously) is simply visited in this batch too.
    for (const w of this.unsynced) {
      if (batch.length >= this.maxWatchersPerSync) break;
      const stream = w.owner as HubStream;
      if (stream.paused || w.state !== 'unsynced') continue;
      if (w.minRev < compactRev) {
        this.sendCompacted(w, compactRev);
        continue;
      }
      if (w.minRev > cur) {
        // Nothing to read (a future watcher moved here by restore()).
        this.toSynced(w);
        touched.add(stream);
        continue;
      }
      batch.push(w);
    }

    if (batch.length > 0) {
      let from = Infinity;
      let wantPrevKv = false;
      for (const w of batch) {
        from = Math.min(from, w.minRev);
        wantPrevKv ||= w.prevKv;
      }
      let read: { events: MvccEvent[]; nextRev: number } | undefined;
      try {
        read = this.store.eventsInRange(from, cur, this.maxEventsPerBatch, wantPrevKv);
      } catch (e) {
        if (!isEtcdError(e) || e.message !== 'etcdserver: mvcc: required revision has been compacted') throw e;
        // The store's compaction point moved past what compactRevision() said, or it counts
        // the compacted revision itself as gone: everything at or below it is lost.
        const lostUpTo = Math.max(this.store.compactRevision(), from);
        for (const w of batch) if (w.minRev <= lostUpTo) this.sendCompacted(w, Math.max(this.store.compactRevision(), w.minRev));
      }
      if (read !== undefined) this.serveBatch(batch, read.events, read.nextRev, cur, touched);
    }

    for (const s of touched) s.tryAnswerProgress();
    for (const w of this.unsynced) {
      if (!(w.owner as HubStream).paused) {
        this.scheduleSync();
        break;
      }
    }
  }

  private serveBatch(batch: Watcher[], events: MvccEvent[], nextRev: number, cur: number, touched: Set<HubStream>): void {
    const from = batch.reduce((m, w) => Math.min(m, w.minRev), Infinity);
    if (!(nextRev > from && nextRev <= cur + 1)) assert.fail(`store returned nextRev ${nextRev} for [${from}, ${cur}]`);
    // Match each event once against the batch's index rather than each watcher against every
    // event: many catching-up watchers usually share a few ranges.
    const index = new WatcherGroup();
    for (const w of batch) index.add(w);
    const perWatcher = new Map<Watcher, MvccEvent[]>();
    for (const ev of events) {
      let stripped: MvccEvent | undefined;
      index.forEachMatching(ev.kv.key, (w) => {
        if (ev.kv.modRevision < w.minRev || !w.accepts(ev)) return;
        const out = w.prevKv ? ev : (stripped ??= withoutPrevKv(ev));
        const list = perWatcher.get(w);
        if (list === undefined) perWatcher.set(w, [out]);
        else list.push(out);
      });
    }
    for (const w of batch) {
      const stream = w.owner as HubStream;
      // A sink call in this batch may have paused the stream or canceled the watcher.
      if (w.state !== 'unsynced' || stream.paused) continue;
      touched.add(stream);
      const chunks = splitAtRevisions(perWatcher.get(w) ?? [], this.maxCatchUpResponseBytes);
      let stoppedAt = 0;
      for (const chunk of chunks) {
        if (w.state !== 'unsynced') break;
        if (chunk !== chunks[0] && stream.paused) {
          // The client stopped reading mid-batch: resume from this chunk's revision later.
          stoppedAt = chunk[0].kv.modRevision;
          break;
        }
        w.progressPending = false;
        stream.emit(response(w.id, cur, { events: chunk }));
      }
      if (w.state !== 'unsynced') continue;
      if (stoppedAt > 0) {
        w.minRev = stoppedAt;
        continue;
      }
      w.minRev = Math.max(w.minRev, nextRev);
      if (w.minRev > cur) this.toSynced(w);
    }
  }

  private toSynced(w: Watcher): void {
    assert(this.unsynced.delete(w));
    w.state = 'synced';
    this.synced.add(w);
  }

  private sendCompacted(w: Watcher, compactRev: number): void {
    assert(this.unsynced.delete(w));
    this.progressWatchers.delete(w);
    w.state = 'compacted';
    this.forgetPrevKv(w);
    // etcd's response for this case carries no revision: its header revision is 0.
    (w.owner as HubStream).emit(response(w.id, 0, { compactRevision: compactRev, canceled: true }));
  }
}

/** One client stream: its watchers, its pause state and its deferred progress request. */
class HubStream implements HubWatchStream {
  paused = false;
  private closed = false;
  private progressRequested = false;
  private nextId = 0;
  private readonly watchers = new Map<number, Watcher>();

  constructor(
    private readonly hub: WatchHub,
    private readonly sink: WatchSink,
  ) {}

  /**
   * Create a watcher. Returns its ID, or -1 when the request was refused; either way the
   * created response (created+canceled with etcd's cancel_reason when refused) has been sent.
   */
  create(params: WatchCreateParams): number {
    if (this.closed) return INVALID_WATCH_ID;
    assert(Number.isSafeInteger(params.startRevision) && Number.isSafeInteger(params.watchId));
    // etcd: an empty key means "\0" (the smallest key); range_end "\0" means "every key >= key".
    const key = params.key.length === 0 ? Buffer.from([0]) : Buffer.from(params.key);
    let end: Buffer | null = null;
    if (params.rangeEnd.length === 1 && params.rangeEnd[0] === 0) end = Buffer.alloc(0);
    else if (params.rangeEnd.length > 0) end = Buffer.from(params.rangeEnd);

    let refusal: string | undefined;
    if (params.startRevision < 0) refusal = WatchCancelReason.NegativeRevision;
    else if (end !== null && end.length > 0 && Buffer.compare(key, end) >= 0) refusal = WatchCancelReason.EmptyRange;
    else if (params.watchId !== AUTO_WATCH_ID && this.watchers.has(params.watchId)) refusal = WatchCancelReason.DuplicateId;
    if (refusal !== undefined) {
      this.emit(
        response(INVALID_WATCH_ID, this.hub.currentRevision(), { created: true, canceled: true, cancelReason: refusal }),
      );
      return INVALID_WATCH_ID;
    }

    let id = params.watchId;
    if (id === AUTO_WATCH_ID) {
      // As etcd: the lowest counter value not taken by a client-chosen ID.
      while (this.watchers.has(this.nextId)) this.nextId++;
      id = this.nextId++;
    }
    const w = this.hub.createWatcher(this, id, params, key, end);
    this.watchers.set(id, w);
    this.emit(response(id, this.hub.currentRevision(), { created: true }));
    if (w.state === 'unsynced') this.hub.startCatchUp();
    return id;
  }

  cancel(watchId: number): boolean {
    if (this.closed) return false;
    const w = this.watchers.get(watchId);
    if (w === undefined) return false;
    this.watchers.delete(watchId);
    this.hub.dropWatcher(w);
    this.emit(response(watchId, this.hub.currentRevision(), { canceled: true }));
    this.tryAnswerProgress();
    return true;
  }

  requestProgress(): void {
    if (this.closed) return;
    // Requests made while one is deferred collapse into it (etcd's deferredProgress).
    if (this.progressRequested) return;
    this.progressRequested = true;
    this.hub.waitForProgress(this);
  }

  resume(): void {
    if (this.closed || !this.paused) return;
    this.paused = false;
    this.tryAnswerProgress();
    this.hub.startCatchUp();
  }

  close(): void {
    if (this.closed) return;
    for (const w of this.watchers.values()) this.hub.dropWatcher(w);
    this.watchers.clear();
    this.closed = true;
    this.progressRequested = false;
    this.hub.streamClosed(this);
  }

  /** @internal Push one response; a false return from the sink pauses the stream. */
  emit(ev: WatchStreamEvent): void {
    if (this.closed) return;
    this.hub.eventsSent += ev.events.length;
    let ok: boolean;
    try {
      ok = this.sink(ev);
    } catch (e) {
      this.close();
      this.hub.onSinkError(e);
      return;
    }
    if (!ok) this.paused = true;
  }

  /** @internal */
  tryAnswerProgress(): void {
    if (!this.progressRequested || this.closed || this.paused) return;
    if (!this.hub.streamInSync(this.watchers.values())) return;
    this.progressRequested = false;
    this.hub.progressAnswered(this);
    let live = false;
    for (const w of this.watchers.values()) {
      if (w.state === 'synced') {
        live = true;
        break;
      }
    }
    // etcd answers through one of the stream's watchers: a stream without any gets nothing.
    if (live) this.emit(response(INVALID_WATCH_ID, this.hub.currentRevision()));
  }
}
