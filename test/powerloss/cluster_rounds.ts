// Power-loss rounds on a 3-member cluster, each member on its own power-loss disk: the power goes
// for one member (the leader), two, or all three in the middle of the writes, or for a follower
// right after it installed a snapshot sent by the leader. After the power comes back every
// acknowledged write must be on every member, and the members' HashKV must agree.
import assert from 'node:assert';
import fs from 'node:fs';
import path from 'node:path';
import { Cluster, revisionOf, type ClusterMember } from '../helpers/cluster';
import { isRpcError, type Msg } from '../helpers/grpc';
import { powerLossDisk, type PowerLossDisk, type PowerLossMode } from '../helpers/powerloss';
import { SeededChoices } from '../helpers/random';
import type { PowerLossServer } from './servers';
import { sleepMs, waitFor } from '../helpers/wait';

const RECONFIG_NOT_YET = new Set(['etcdserver: unhealthy cluster', 'etcdserver: re-configuration failed due to not enough started members']);

export type ClusterFault = 'leader' | 'two' | 'all' | 'snapshot-follower' | 'member-add';

const PUT_DEADLINE_MS = 5_000;
const READY_TIMEOUT_MS = 30_000;
const WRITERS = 8;
const MAX_LIVE_MS = 800;
const MIN_LIVE_ACKS = 50;

export interface Acked {
  puts: Map<string, [string, number]>;
  maxRevision: number;
}

/** Writers to `m` until it dies (or `stop` is set); what it acknowledged goes into `acked`. */
export function writeUntil(m: ClusterMember, acked: Acked, prefix: string, stop: { now: boolean }): Promise<void> {
  let failed = false;
  return Promise.all(
    Array.from({ length: WRITERS }, async (_, w) => {
      for (let i = 0; !failed && !stop.now; i++) {
        const key = `${prefix}/w${w}/${String(i).padStart(6, '0')}`;
        const value = `${key}=${Math.random().toString(36).slice(2)}`;
        try {
          const r = await m.client().unary('KV', 'Put', { key: Buffer.from(key), value: Buffer.from(value) }, PUT_DEADLINE_MS);
          acked.puts.set(key, [value, revisionOf(r)]);
          acked.maxRevision = Math.max(acked.maxRevision, revisionOf(r));
        } catch {
          failed = true;
        }
      }
    }),
  ).then(() => undefined);
}

export async function waitAcks(acked: Acked, atLeast: number): Promise<void> {
  await waitFor('writes to be acknowledged', async () => (acked.puts.size >= atLeast ? true : undefined), { timeoutMs: 30_000, intervalMs: 10 });
}

/** Every member's serializable view once they converged: each acknowledged write there, one HashKV. */
export async function verify(cluster: Cluster, acked: Acked): Promise<string[]> {
  const lost: string[] = [];
  const revision = await cluster.waitConverged(cluster.members, 30_000);
  if (revision < acked.maxRevision) lost.push(`revision went back: ${revision} < ${acked.maxRevision}`);
  const hashes = new Set<string>();
  for (const m of cluster.members) {
    const r = await m.client().unary('KV', 'Range', { key: Buffer.from([0]), range_end: Buffer.from([0]), serializable: true, revision: String(revision) }, 20_000);
    const served = new Map<string, [string, number]>();
    for (const kv of (r['kvs'] as Msg[]) ?? []) served.set(String(kv['key']), [String(kv['value']), Number(kv['mod_revision'])]);
    for (const [key, [value, rev]] of acked.puts) {
      const got = served.get(key);
      if (got === undefined || got[0] !== value || got[1] !== rev) lost.push(`${m.name}: ${key}@${rev}: ${got ? `${got[0]}@${got[1]}` : 'missing'}`);
    }
    const h = await m.client().unary('Maintenance', 'HashKV', { revision: String(revision) }, 20_000);
    hashes.add(String(h['hash']));
  }
  if (hashes.size !== 1) lost.push(`HashKV at revision ${revision} differs across members: ${[...hashes].join(', ')}`);
  return lost;
}

export interface ClusterRoundResult {
  acked: number;
  lost: string[];
}

/** One round on a fresh 3-member cluster of `bin` (ours when undefined). */
export async function clusterPowerLossRound(opts: { server: PowerLossServer; fault: ClusterFault; mode: PowerLossMode; seed: number }): Promise<ClusterRoundResult> {
  const rng = new SeededChoices(opts.seed);
  const disks: PowerLossDisk[] = [];
  let cluster: Cluster | null = null;
  try {
    // member-add brings a fourth member, on a disk of its own.
    for (let i = 0; i < (opts.fault === 'member-add' ? 4 : 3); i++) disks.push(await powerLossDisk());
    const diskOf = new Map<string, PowerLossDisk>();
    const snapshots = [...opts.server.snapshotArgs];
    cluster = await Cluster.start({
      bin: opts.server.bin,
      args: snapshots,
      readyTimeoutMs: READY_TIMEOUT_MS,
      // Members are m0, m1, m2 (again on a start retried for a port taken): a fresh directory each time.
      memberDataDir: (name) => {
        const disk = disks[Number(name.slice(1))];
        assert(disk, `no disk for member ${name}`);
        diskOf.set(name, disk);
        return fs.mkdtempSync(path.join(disk.dir, 'data-'));
      },
    });
    const c = cluster;
    const acked: Acked = { puts: new Map(), maxRevision: 0 };
    const leader = await c.waitLeader();
    const followers = c.members.filter((m) => m !== leader);
    let victims: ClusterMember[];
    if (opts.fault === 'snapshot-follower') {
      // A follower misses more than the leader keeps of its log, comes back, installs the leader's
      // snapshot, and loses power right after.
      const f = rng.pick(followers);
      await f.kill9();
      const stop = { now: false };
      const writing = writeUntil(leader, acked, 'behind', stop);
      // The leader keeps 50 entries past its snapshot (etcd 3.4: 5000, not configurable there).
      await waitAcks(acked, opts.server.writesPastCatchup);
      stop.now = true;
      await writing;
      const logBefore = f.logs().length;
      f.relaunch();
      await f.waitReady(READY_TIMEOUT_MS);
      await c.waitConverged(c.members, 30_000);
      // (Both servers log etcd's line once a leader's snapshot is in place.)
      assert(f.logs().slice(logBefore).includes('applied snapshot'), `${f.name} caught up without installing a snapshot`);
      victims = [f];
    } else if (opts.fault === 'member-add') {
      // A member joins while writes go on; the power goes for all four once it serves.
      const stop = { now: false };
      const writing = writeUntil(leader, acked, 'joining', stop);
      await waitAcks(acked, MIN_LIVE_ACKS);
      const m3 = await c.prepareMember();
      // etcd refuses a member change until its members have been connected for 5 s ("unhealthy cluster").
      await waitFor(
        'the member to be added',
        async () => {
          try {
            return await leader.client().unary('Cluster', 'MemberAdd', { peerURLs: [m3.peerUrl] }, 10_000);
          } catch (e) {
            // etcd refuses a member change until every member has been connected a while (and
            // counts started members): answers to wait out, not failures.
            if (isRpcError(e) && RECONFIG_NOT_YET.has(e.details)) return undefined;
            throw e;
          }
        },
        { timeoutMs: 20_000, intervalMs: 250 },
      );
      c.members.push(m3);
      m3.launch(c.initialClusterOf(c.members), 'existing', c.token, c.opts.args);
      await m3.waitReady(READY_TIMEOUT_MS);
      await sleepMs(rng.int(0, MAX_LIVE_MS));
      victims = [...c.members];
      await Promise.all(victims.map((m) => m.kill9()));
      stop.now = true;
      await writing;
    } else {
      victims = opts.fault === 'leader' ? [leader] : opts.fault === 'two' ? [leader, rng.pick(followers)] : [...c.members];
      const stop = { now: false };
      const writing = writeUntil(leader, acked, 'live', stop);
      await waitAcks(acked, MIN_LIVE_ACKS);
      await sleepMs(rng.int(0, MAX_LIVE_MS));
      await Promise.all(victims.map((m) => m.kill9()));
      stop.now = true;
      await writing;
    }
    if (victims.length === 1 && opts.fault === 'snapshot-follower') await victims[0]!.kill9();
    for (const m of victims) {
      const disk = diskOf.get(m.name)!;
      await disk.powerOff(opts.mode, opts.seed);
      await disk.powerOn();
    }
    for (const m of victims) m.relaunch();
    await Promise.all(c.members.map((m) => m.waitReady(READY_TIMEOUT_MS)));
    assert(acked.puts.size > 0);
    return { acked: acked.puts.size, lost: await verify(c, acked) };
  } finally {
    await cluster?.close();
    for (const d of disks) await d.dispose();
  }
}
