// Power-loss rounds: a member on a power-loss disk (test/helpers/powerloss.ts) takes a load, then
// the power goes (SIGKILL, then everything not fsynced is lost), the power comes back, and the
// member must start and still hold every write it acknowledged, at the revision it said, with
// the revision never going back and its history replayed by a watch from the start.
import assert from 'node:assert';
import fs from 'node:fs';
import path from 'node:path';
import { revisionOf } from '../helpers/cluster';
import { startEtcd, type EtcdMember } from '../helpers/etcd-process';
import { EtcdGrpc, type Msg } from '../helpers/grpc';
import { powerLossDisk, type PowerLossMode } from '../helpers/powerloss';
import { SeededChoices } from '../helpers/random';
import { sleepMs } from '../helpers/wait';

/** What the member does before the power goes. */
export type LoadShape = 'one-writer' | 'writers-16' | 'defrag' | 'compact-defrag' | 'leases' | 'snapshot-save' | 'wal-cut';

export interface RoundResult {
  acked: number;
  /** Acknowledged writes missing (or changed) after the restart: must be 0. */
  lost: string[];
  maxAckedRevision: number;
  revisionAfter: number;
}

const PUT_DEADLINE_MS = 5_000;
const VERIFY_DEADLINE_MS = 20_000;
const MAX_HISTORY_BYTES = 16 * 1024 * 1024;

interface Acked {
  /** key -> [value, mod revision] of each acknowledged put (every key is written once). */
  puts: Map<string, [string, number]>;
  maxRevision: number;
  /** Revisions compacted away: history below this may not replay. */
  compactedTo: number;
}

async function put(client: EtcdGrpc, acked: Acked, key: string): Promise<void> {
  const value = `${key}=${Math.random().toString(36).slice(2)}`;
  const r = await client.unary('KV', 'Put', { key: Buffer.from(key), value: Buffer.from(value) }, PUT_DEADLINE_MS);
  const rev = revisionOf(r);
  acked.puts.set(key, [value, rev]);
  acked.maxRevision = Math.max(acked.maxRevision, rev);
}

async function writers(client: EtcdGrpc, acked: Acked, n: number, perWriter: number, prefix: string): Promise<void> {
  await Promise.all(
    Array.from({ length: n }, async (_, w) => {
      for (let i = 0; i < perWriter; i++) await put(client, acked, `${prefix}/w${w}/${String(i).padStart(5, '0')}`);
    }),
  );
}

/** Writers that go on until the member dies under them (their failed puts were never acknowledged). */
function writersUntilKilled(client: EtcdGrpc, acked: Acked, n: number): Promise<void> {
  let failed = false;
  return Promise.all(
    Array.from({ length: n }, async (_, w) => {
      for (let i = 0; !failed; i++) {
        await put(client, acked, `live/w${w}/${String(i).padStart(6, '0')}`).catch(() => (failed = true));
      }
    }),
  ).then(() => undefined);
}

/** Writers running when the power goes, per load shape (after its own steps). */
const LIVE_WRITERS: Record<LoadShape, number> = {
  'one-writer': 1,
  'writers-16': 16,
  defrag: 0,
  'compact-defrag': 4,
  leases: 4,
  'snapshot-save': 0,
  'wal-cut': 2,
};
/** Large values that fill a WAL segment (64 MB) so that the log cuts a new one. */
const BIG_VALUE_BYTES = 1024 * 1024;
const BIG_VALUES = 70;
/** The power goes this long, at most, after the live writers have had this many writes acknowledged. */
const MAX_LIVE_MS = 800;
const MIN_LIVE_ACKS = 50;

/** Runs `shape`'s own steps on the member; every write it acknowledges goes into `acked`. */
async function load(shape: LoadShape, client: EtcdGrpc, acked: Acked, scale: number): Promise<void> {
  switch (shape) {
    case 'one-writer':
    case 'writers-16':
      return;
    case 'defrag':
      // Writes, a defragmentation, then an idle stretch: nothing but the defragmentation itself
      // makes its copy durable.
      await writers(client, acked, 4, 100 * scale, 'before');
      await client.unary('Maintenance', 'Defragment', {}, 30_000);
      await sleepMs(1_500);
      return;
    case 'compact-defrag':
      for (let r = 0; r < 3; r++) {
        await writers(client, acked, 4, 50 * scale, `cd${r}`);
        await client.unary('KV', 'Compact', { revision: acked.maxRevision, physical: true }, 10_000);
        acked.compactedTo = acked.maxRevision;
        await client.unary('Maintenance', 'Defragment', {}, 30_000);
      }
      await put(client, acked, 'after-compact-defrag');
      return;
    case 'snapshot-save': {
      // A client streams a snapshot (etcdctl snapshot save) while writes go on; the power goes
      // with the snapshot half read.
      await writers(client, acked, 4, 50 * scale, 'before-snap');
      const stream = client.serverStream('Maintenance', 'Snapshot', {});
      let chunks = 0;
      const firstChunk = new Promise<void>((resolve, reject) => {
        stream.on('data', () => {
          if (++chunks === 1) resolve();
        });
        stream.on('error', reject);
      });
      await Promise.all([firstChunk, writers(client, acked, 4, 25 * scale, 'during-snap')]);
      stream.pause();
      return;
    }
    case 'wal-cut':
      // Past a segment's 64 MB: the log cuts a new segment (and the writes go on into it).
      await Promise.all(
        Array.from({ length: 2 }, async (_, w) => {
          for (let i = 0; i < BIG_VALUES / 2; i++) {
            const key = `big/w${w}/${i}`;
            const value = `${key}=`.padEnd(BIG_VALUE_BYTES, String.fromCharCode(97 + (i % 26)));
            const r = await client.unary('KV', 'Put', { key: Buffer.from(key), value: Buffer.from(value) }, 30_000);
            acked.puts.set(key, [value, revisionOf(r)]);
            acked.maxRevision = Math.max(acked.maxRevision, revisionOf(r));
          }
        }),
      );
      return;
    case 'leases': {
      // Keys attached to short leases that expire (their revokes go through the log) while
      // other writes go on.
      for (let i = 0; i < 5; i++) {
        const g = await client.unary('Lease', 'LeaseGrant', { TTL: 1 }, PUT_DEADLINE_MS);
        await client.unary('KV', 'Put', { key: Buffer.from(`lease/${i}`), value: Buffer.from('x'), lease: g['ID'] }, PUT_DEADLINE_MS);
      }
      // The writers that follow outlive the leases (1 s, 2 s at most after the grant).
      await writers(client, acked, 1, 20 * scale, 'lease-load');
      return;
    }
  }
}

/** Every acknowledged put, as the restarted member serves it (all of them if nothing was lost). */
async function verify(client: EtcdGrpc, acked: Acked): Promise<{ lost: string[]; revision: number }> {
  const lost: string[] = [];
  // In pages (the wal-cut shape's values are 1 MiB each), all at the first page's revision.
  const served = new Map<string, [string, number]>();
  let from = Buffer.from([0]);
  let revision = 0;
  for (;;) {
    const r = await client.unary('KV', 'Range', { key: from, range_end: Buffer.from([0]), limit: '16', revision: String(revision) }, VERIFY_DEADLINE_MS);
    revision ||= revisionOf(r);
    const kvs = (r['kvs'] as Msg[]) ?? [];
    for (const kv of kvs) served.set(String(kv['key']), [String(kv['value']), Number(kv['mod_revision'])]);
    if (!r['more'] || kvs.length === 0) break;
    from = Buffer.concat([kvs[kvs.length - 1]!['key'] as Buffer, Buffer.from([0])]);
  }
  for (const [key, [value, rev]] of acked.puts) {
    const got = served.get(key);
    if (got === undefined || got[0] !== value || got[1] !== rev) lost.push(`${key}@${rev}: ${got ? `${got[0]}@${got[1]}` : 'missing'}`);
  }
  // History: a watch from the first revision kept replays each acknowledged put at its revision
  // (not for the 1 MiB values: a watch response holds many events, past a client's receive limit).
  const historyFrom = acked.compactedTo + 1;
  const want = [...acked.puts].filter(([, [, rev]]) => rev >= historyFrom);
  const historyBytes = want.reduce((n, [, [value]]) => n + value.length, 0);
  if (want.length > 0 && lost.length === 0 && historyBytes < MAX_HISTORY_BYTES) {
    const seen = new Map<string, number>();
    const w = client.bidi('Watch', 'Watch', VERIFY_DEADLINE_MS);
    await new Promise<void>((resolve, reject) => {
      w.on('data', (m: Msg) => {
        for (const ev of (m['events'] as Msg[]) ?? []) {
          const kv = ev['kv'] as Msg;
          seen.set(String(kv['key']), Number(kv['mod_revision']));
        }
        if (m['compact_revision'] && Number(m['compact_revision']) > 0) reject(new Error(`watch from ${historyFrom} compacted at ${String(m['compact_revision'])}`));
        if (want.every(([k]) => seen.has(k))) resolve();
      });
      w.on('error', reject);
      w.write({ create_request: { key: Buffer.from([0]), range_end: Buffer.from([0]), start_revision: String(historyFrom) } });
    }).finally(() => w.cancel());
    for (const [key, [, rev]] of want) if (seen.get(key) !== rev) lost.push(`${key}: watch replayed it at ${seen.get(key)}, acknowledged at ${rev}`);
  }
  return { lost, revision };
}

export interface RoundOptions {
  bin?: string;
  shape: LoadShape;
  mode: PowerLossMode;
  seed: number;
  /** Multiplies the load's size. */
  scale?: number;
  args?: string[];
  /** The server's flags for frequent snapshots (test/powerloss/servers.ts); a default by `bin` otherwise. */
  snapshotArgs?: readonly string[];
}

/** One round on a fresh single member. Throws if the member does not start again. */
export async function powerLossRound(opts: RoundOptions): Promise<RoundResult> {
  const disk = await powerLossDisk();
  const dataDir = path.join(disk.dir, 'data');
  fs.mkdirSync(dataDir);
  let m: EtcdMember | null = null;
  try {
    // Snapshots (and for ours, a WAL that drops what they cover) every 100 entries: the member's
    // state must then come from its backend, not from replaying the whole log.
    const snapshots = [...(opts.snapshotArgs ?? (opts.bin === undefined ? ['--snapshot-count=100', '--experimental-snapshot-catchup-entries=50'] : ['--snapshot-count=100']))];
    m = await startEtcd({ bin: opts.bin, dataDir, args: [...snapshots, ...(opts.args ?? [])] });
    const acked: Acked = { puts: new Map(), maxRevision: 0, compactedTo: 0 };
    const client = new EtcdGrpc(m.clientHostPort);
    try {
      await load(opts.shape, client, acked, opts.scale ?? 1);
      if (opts.shape === 'wal-cut') {
        const segments = fs.readdirSync(path.join(dataDir, 'member', 'wal')).filter((n) => n.endsWith('.wal'));
        assert(segments.length >= 2, `the log cut no new segment: ${segments.join(', ')}`);
      }
      const live = LIVE_WRITERS[opts.shape];
      if (live > 0) {
        // The power goes in the middle of the writes, at a moment the seed picks.
        const before = acked.puts.size;
        const writing = writersUntilKilled(client, acked, live);
        const deadline = Date.now() + 30_000;
        while (acked.puts.size < before + MIN_LIVE_ACKS) {
          assert(Date.now() < deadline, 'the live writers made no progress');
          await sleepMs(10);
        }
        await sleepMs(new SeededChoices(opts.seed).int(0, MAX_LIVE_MS));
        await m.kill9();
        await writing;
      }
    } finally {
      client.close();
    }
    if (m.proc.exitCode === null && m.proc.signalCode === null) await m.kill9();
    await disk.powerOff(opts.mode, opts.seed);
    await disk.powerOn();
    await m.restart();
    const after = new EtcdGrpc(m.clientHostPort);
    try {
      const { lost, revision } = await verify(after, acked);
      if (revision < acked.maxRevision) lost.push(`revision went back: ${revision} < ${acked.maxRevision}`);
      assert(acked.puts.size > 0);
      return { acked: acked.puts.size, lost, maxAckedRevision: acked.maxRevision, revisionAfter: revision };
    } finally {
      after.close();
    }
  } finally {
    if (m !== null && m.proc.exitCode === null && m.proc.signalCode === null) await m.stop();
    await disk.dispose();
  }
}
