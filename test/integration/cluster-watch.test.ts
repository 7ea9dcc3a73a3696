// Watches on followers see every write made through the leader, in revision order, without gaps,
// across a leader change (kill -9 of the leader); a restarted member replays the same history.
import { afterAll, describe, expect, it } from 'vitest';
import { Cluster, ClusterMember, revisionOf } from '../helpers/cluster';
import { EtcdGrpc, Msg, StreamReader } from '../helpers/grpc';
import { sleepMs, waitFor } from '../helpers/wait';

const ELECTION_TIMEOUT_MS = 1_000;
const MAX_EVENTS = 20_000;

let cluster: Cluster | undefined;
const grpcs: EtcdGrpc[] = [];
afterAll(async () => {
  for (const g of grpcs) g.close();
  await cluster?.close();
}, 30_000);

interface SeenEvent {
  key: string;
  value: string;
  modRevision: number;
}

/** A watch on `prefix` from `startRev`, collecting its events (bounded). */
class PrefixWatch {
  readonly events: SeenEvent[] = [];
  readonly problems: string[] = [];
  private readonly stream;
  private readonly reader: StreamReader;
  private pump: Promise<void> | null = null;
  private stopped = false;

  constructor(readonly member: ClusterMember, prefix: string, startRev: number) {
    const g = new EtcdGrpc(member.clientHostPort);
    grpcs.push(g);
    this.stream = g.bidi('Watch', 'Watch');
    this.reader = new StreamReader(this.stream, MAX_EVENTS);
    const end = Buffer.from(prefix);
    end[end.length - 1]!++;
    this.stream.write({ create_request: { key: Buffer.from(prefix), range_end: end, start_revision: String(startRev) } });
  }

  async created(): Promise<void> {
    const m = await this.reader.next(10_000);
    expect(m['created'], `watch on ${this.member.name} created`).toBe(true);
    this.pump = this.run();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      let m: Msg;
      try {
        m = await this.reader.next(500);
      } catch (e) {
        if (/no stream message/.test((e as Error).message)) continue;
        if (!this.stopped) this.problems.push(`watch on ${this.member.name} failed: ${(e as Error).message}`);
        return;
      }
      if (m['canceled']) {
        this.problems.push(`watch on ${this.member.name} canceled: ${String(m['cancel_reason'])}`);
        return;
      }
      for (const ev of m['events'] as Array<{ type: string; kv: { key: Buffer; value: Buffer; mod_revision: string } }>) {
        if (ev.type.toUpperCase() !== 'PUT') this.problems.push(`unexpected ${ev.type} event`);
        this.events.push({ key: ev.kv.key.toString(), value: ev.kv.value.toString(), modRevision: Number(ev.kv.mod_revision) });
      }
    }
  }

  lastRevision(): number {
    return this.events.length === 0 ? 0 : this.events[this.events.length - 1]!.modRevision;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stream.end();
    await this.pump;
  }
}

describe('3-member cluster: watches across a leader change', () => {
  it('followers deliver every event in order, without gaps, across kill -9 of the leader', async () => {
    cluster = await Cluster.start({ size: 3, args: [`--election-timeout=${ELECTION_TIMEOUT_MS}`, '--heartbeat-interval=100'] });
    const c = cluster;
    const leader = await c.waitLeader();
    const followers = c.members.filter((m) => m !== leader);
    const startRev = (await leader.status()).revision + 1;
    const watches = followers.map((f) => new PrefixWatch(f, 'w/', startRev));
    for (const w of watches) await w.created();

    // One sequential writer, to the leader first, then to whoever answers.
    const acked = new Map<string, { value: string; revision: number }>();
    let killedAtMs = 0;
    let seq = 0;
    let target: ClusterMember = leader;
    const writeUntil = async (stopAtMs: () => number): Promise<void> => {
      while (Date.now() < stopAtMs()) {
        seq++;
        const key = `w/${String(seq).padStart(6, '0')}`;
        const value = `v${seq}`;
        try {
          const r = await target.client().unary('KV', 'Put', { key: Buffer.from(key), value: Buffer.from(value) }, 2_000);
          acked.set(key, { value, revision: revisionOf(r) });
        } catch {
          const ups = c.up();
          target = ups[seq % ups.length]!;
          await sleepMs(20);
        }
      }
    };
    const writing = writeUntil(() => (killedAtMs === 0 ? Infinity : killedAtMs + 4 * ELECTION_TIMEOUT_MS));
    await waitFor('writes through the leader', () => acked.size >= 30, { timeoutMs: 15_000 });
    killedAtMs = Date.now();
    await leader.kill9();
    const newLeader = await c.waitLeader({ among: followers, timeoutMs: 10 * ELECTION_TIMEOUT_MS });
    await writing;
    const ackedBeforeKill = [...acked.values()].filter((a) => a.revision > 0).length;

    const finalRev = await c.waitConverged(followers, 20_000);
    for (const w of watches) {
      await waitFor(`watch on ${w.member.name} to reach revision ${finalRev}`, () => w.lastRevision() >= finalRev, { timeoutMs: 15_000 });
    }
    for (const w of watches) await w.stop();

    for (const w of watches) {
      expect(w.problems, `watch on ${w.member.name}`).toEqual([]);
      // Only these puts change the store: revisions run contiguously from the start.
      const revs = w.events.map((e) => e.modRevision);
      const gaps: string[] = [];
      for (let i = 0; i < revs.length; i++) if (revs[i] !== startRev + i) gaps.push(`#${i}: rev ${revs[i]}, want ${startRev + i}`);
      expect(gaps.slice(0, 10), `watch on ${w.member.name}: out of order or gaps`).toEqual([]);
      expect(w.lastRevision()).toBe(finalRev);
      const byKey = new Map(w.events.map((e) => [e.key, e]));
      const missing = [...acked].filter(([k, a]) => byKey.get(k)?.modRevision !== a.revision || byKey.get(k)?.value !== a.value);
      expect(missing.slice(0, 10), `acknowledged puts missing from the watch on ${w.member.name}`).toEqual([]);
    }
    expect(watches[0]!.events).toEqual(watches[1]!.events);

    // The killed member comes back with the same history.
    leader.relaunch();
    await leader.waitReady(20_000);
    await c.waitConverged(c.members, 20_000);
    const replay = new PrefixWatch(leader, 'w/', startRev);
    await replay.created();
    await waitFor('the replayed history', () => replay.lastRevision() >= finalRev, { timeoutMs: 10_000 });
    await replay.stop();
    expect(replay.events).toEqual(watches[0]!.events);

    console.log(
      `[cluster-watch] ${acked.size} puts acked (${ackedBeforeKill} with revisions), ${watches[0]!.events.length} events ` +
        `(revisions ${startRev}..${finalRev}) on each follower watch across the leader change ${leader.name} -> ${newLeader.name}`,
    );
  }, 80_000);
});
