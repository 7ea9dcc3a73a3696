// Group commit for the WAL file: sync() resolves after an fdatasync that began after the call, so
// everything written before the call is durable. Callers that arrive while an fdatasync is running
// share the next one. fdatasync runs on libuv's thread pool, so the event loop keeps serving
// clients (and gathering the next batch) while the disk works. syncNow() is the same guarantee on
// the calling thread, for when no one needs the event loop meanwhile (see Wal.save).
import assert from 'node:assert';
import fs from 'node:fs';

type Waiter = { resolve: () => void; reject: (e: Error) => void };

/** Bound on callers waiting for one fdatasync: Raft saves one Ready at a time, so this is generous. */
const MAX_WAITERS = 100_000;

export class Syncer {
  private running = false;
  private next: Waiter[] = [];
  private retired: number[] = [];
  private failed: Error | null = null;
  private idle: (() => void)[] = [];

  /** `unsafeNoFsync` (etcd's --unsafe-no-fsync): every sync succeeds without an fdatasync. */
  constructor(
    private fd: number,
    private readonly unsafeNoFsync = false,
  ) {}

  sync(): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    if (this.unsafeNoFsync) return Promise.resolve();
    assert(this.next.length < MAX_WAITERS, 'too many WAL sync waiters');
    return new Promise((resolve, reject) => {
      this.next.push({ resolve, reject });
      if (!this.running) this.start();
    });
  }

  /**
   * fdatasync on the calling thread: everything written before the call is durable when it returns.
   * Throws (and fails every later sync) if the disk reports an error.
   */
  syncNow(): void {
    if (this.failed) throw this.failed;
    if (this.unsafeNoFsync) return;
    try {
      fs.fdatasyncSync(this.fd);
    } catch (e) {
      this.failed = e as Error;
      throw e;
    }
  }

  /** Sync `fd` from now on; `oldFd` (already made durable by the caller) is closed when unused. */
  switchTo(fd: number, oldFd: number): void {
    this.fd = fd;
    if (this.running) this.retired.push(oldFd);
    else fs.closeSync(oldFd);
  }

  private start(): void {
    const batch = this.next;
    this.next = [];
    this.running = true;
    fs.fdatasync(this.fd, (err) => {
      this.running = false;
      for (const fd of this.retired.splice(0)) fs.closeSync(fd);
      if (err) {
        // A failed fdatasync leaves the page cache in an unknown state: nothing may be trusted after it.
        this.failed = err;
        for (const w of batch) w.reject(err);
        for (const w of this.next.splice(0)) w.reject(err);
      } else {
        for (const w of batch) w.resolve();
        if (this.next.length > 0) {
          this.start();
          return;
        }
      }
      for (const f of this.idle.splice(0)) f();
    });
  }

  /** Wait for any running fdatasync, then close the file. */
  async close(): Promise<void> {
    if (this.running) await new Promise<void>((res) => this.idle.push(res));
    fs.closeSync(this.fd);
  }
}
