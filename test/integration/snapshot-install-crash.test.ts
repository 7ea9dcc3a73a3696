// A follower installing a leader's snapshot crashes at each step of the install, and its disk
// loses what was not fsynced (issue 50). The steps, in etcd's order: the snapshot's database is
// saved beside the backend, the WAL records the snapshot, the database replaces the backend.
// Whatever step the crash cuts, the member must start again and serve every acknowledged write.
// The crash is a failpoint (GOFAIL_FAILPOINTS, etcd's names) so that it lands exactly there; the
// real etcd's release builds have none, so this runs on ours only (the random power-loss rounds
// in powerloss-cluster.test.ts cover the same window for both, by chance).
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Cluster } from '../helpers/cluster';
import { powerLossDisk, type PowerLossDisk, type PowerLossMode } from '../helpers/powerloss';
import { verify, waitAcks, writeUntil, type Acked } from '../powerloss/cluster_rounds';

const READY_TIMEOUT_MS = 30_000;
/** Writes while the follower is down: past the leader's 50 catch-up entries, so it must send a snapshot. */
const WRITES_BEHIND = 400;

type Step = 'raftBeforeSaveSnap' | 'raftAfterSaveSnap';
const CASES: Array<[Step, PowerLossMode, string]> = [
  // The database is saved, the WAL does not know the snapshot: the file is stale at start-up, the
  // leader sends a snapshot again.
  ['raftBeforeSaveSnap', 'drop', 'removed unused snapshot database'],
  ['raftBeforeSaveSnap', 'meta', 'removed unused snapshot database'],
  // The WAL holds the snapshot and dropped the log before it, the backend is the old one: start-up
  // installs the saved database (before the fix the backend went first and the WAL could lose the
  // snapshot, leaving the backend ahead of the log; start-up refused it).
  ['raftAfterSaveSnap', 'drop', 'recovered v3 backend from snapshot'],
  ['raftAfterSaveSnap', 'random', 'recovered v3 backend from snapshot'],
];

describe('a follower crashes while it installs a leader snapshot, then loses power', () => {
  it.each(CASES)('crash at %s, power loss %s: the member starts (%s) with every acknowledged write', { timeout: 150_000 }, async (step, mode, logged) => {
    const disks: PowerLossDisk[] = [];
    let cluster: Cluster | null = null;
    try {
      for (let i = 0; i < 3; i++) disks.push(await powerLossDisk());
      cluster = await Cluster.start({
        args: ['--snapshot-count=100', '--experimental-snapshot-catchup-entries=50'],
        readyTimeoutMs: READY_TIMEOUT_MS,
        memberDataDir: (name) => fs.mkdtempSync(path.join(disks[Number(name.slice(1))]!.dir, 'data-')),
      });
      const c = cluster;
      const leader = await c.waitLeader();
      const f = c.members.find((m) => m !== leader)!;
      const disk = disks[Number(f.name.slice(1))]!;
      await f.kill9();
      const acked: Acked = { puts: new Map(), maxRevision: 0 };
      const stop = { now: false };
      const writing = writeUntil(leader, acked, 'behind', stop);
      await waitAcks(acked, WRITES_BEHIND);
      stop.now = true;
      await writing;

      const before = f.logs().length;
      f.relaunch({ GOFAIL_FAILPOINTS: `${step}=panic` });
      expect(await f.waitExited(READY_TIMEOUT_MS), `${f.name} did not reach ${step}`).toBe(true);
      expect(f.logs().slice(before)).toContain(`failpoint panic: ${step}`);
      await disk.powerOff(mode, 7);
      await disk.powerOn();

      const restarted = f.logs().length;
      f.relaunch();
      await f.waitReady(READY_TIMEOUT_MS);
      expect(f.logs().slice(restarted)).toContain(logged);
      expect(await verify(c, acked)).toEqual([]);
      // No leftover snapshot database once it is in place.
      const snapDir = path.join(f.dataDir, 'member', 'snap');
      expect(fs.readdirSync(snapDir).filter((n) => n.includes('.snap.db'))).toEqual([]);
    } finally {
      await cluster?.close();
      for (const d of disks) await d.dispose();
    }
  });
});
