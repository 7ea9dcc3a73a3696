// SIGSTOP the leader for longer than the election timeout, then SIGCONT: the others elect a new
// leader and keep serving meanwhile; the old leader, resumed, serves no stale read, steps down,
// rejoins as a follower of the new term, and no acknowledged write is lost. Then etcdctl
// move-leader hands leadership back to it.
import { afterAll, describe, expect, it } from 'vitest';
import { Cluster, firstLogLineAfter, lostWrites, readPrefix, revisionOf, WriteLoad } from '../helpers/cluster';
import { etcdctl } from '../helpers/etcdctl';
import { sleepMs, waitFor } from '../helpers/wait';

const ELECTION_TIMEOUT_MS = 1_000;
const PAUSE_MS = 4 * ELECTION_TIMEOUT_MS;

let cluster: Cluster | undefined;
afterAll(async () => {
  await cluster?.close();
}, 30_000);

describe('3-member cluster: SIGSTOP / SIGCONT the leader', () => {
  it('keeps serving while the leader is paused; the old leader steps down and rejoins', async () => {
    cluster = await Cluster.start({ size: 3, args: [`--election-timeout=${ELECTION_TIMEOUT_MS}`, '--heartbeat-interval=100'] });
    const c = cluster;
    const oldLeader = await c.waitLeader();
    const oldTerm = (await oldLeader.status()).raftTerm;
    const load = new WriteLoad('load/', () => c.up(), { writers: 3, putDeadlineMs: 3_000 }).start();
    await sleepMs(1_000);

    const pausedAtMs = Date.now();
    oldLeader.pause();
    const survivors = c.members.filter((m) => m !== oldLeader);
    const newLeader = await c.waitLeader({ among: survivors, timeoutMs: 10 * ELECTION_TIMEOUT_MS });
    const electedAfterMs = Date.now() - pausedAtMs;
    const newTerm = (await newLeader.status()).raftTerm;
    expect(newTerm).toBeGreaterThan(oldTerm);

    // Writes keep being acknowledged while the old leader is stopped.
    const ackedAtElection = load.log.acked.size;
    await waitFor('writes acknowledged while the old leader is paused', () => load.log.acked.size >= ackedAtElection + 10, {
      timeoutMs: 10_000,
    });
    // A write the paused leader cannot know about.
    const marker = await newLeader.client().unary('KV', 'Put', { key: Buffer.from('marker'), value: Buffer.from('during-pause') }, 5_000);
    const markerRev = revisionOf(marker);
    const left = PAUSE_MS - (Date.now() - pausedAtMs);
    if (left > 0) await sleepMs(left);
    expect(oldLeader.isPaused()).toBe(true);
    const ackedDuringPause = load.log.acked.size - ackedAtElection;

    // Resumed, the old leader still believes it leads until it hears the new term: a linearizable
    // read it answers must not be stale (it may fail instead).
    oldLeader.resume();
    const resumedAtMs = Date.now();
    let readOutcome: string;
    try {
      const r = await oldLeader.client().unary('KV', 'Range', { key: Buffer.from('marker') }, 8_000);
      const kvs = r['kvs'] as Array<{ value: Buffer }>;
      readOutcome = `rev ${revisionOf(r)} value ${kvs[0]?.value.toString()}`;
      expect(kvs.length, 'linearizable read on the resumed old leader').toBe(1);
      expect(kvs[0]!.value.toString()).toBe('during-pause');
      expect(revisionOf(r)).toBeGreaterThanOrEqual(markerRev);
    } catch (e) {
      readOutcome = `error ${(e as Error).message}`;
      if (/expected/.test((e as Error).message)) throw e;
    }

    // It steps down and follows the new leader, in the new term.
    await waitFor(
      'the old leader to follow the new one',
      async () => {
        const st = await oldLeader.status();
        return st.leader === newLeader.id && st.raftTerm === newTerm;
      },
      { timeoutMs: 10 * ELECTION_TIMEOUT_MS },
    );
    const rejoinedAfterMs = Date.now() - resumedAtMs;
    const stepDownLogged = firstLogLineAfter(oldLeader, /elected leader/, resumedAtMs - 1_000) !== undefined;

    await sleepMs(500);
    const log = await load.stop();
    const rev = await c.waitConverged(c.members, 20_000);
    for (const m of c.members) {
      const all = await readPrefix(m.client(), 'load/');
      expect(lostWrites(log, all.kvs), `acknowledged writes lost on ${m.name}`).toEqual([]);
      expect(all.revision).toBeGreaterThanOrEqual(rev);
    }
    // Nobody was disrupted by the old leader's return: same leader, same term.
    for (const m of c.members) {
      const st = await m.status();
      expect(st.leader, `${m.name}'s leader`).toBe(newLeader.id);
      expect(st.raftTerm, `${m.name}'s term`).toBe(newTerm);
    }
    // Hand leadership back to the rejoined member with etcdctl move-leader (etcd's MoveLeader).
    const endpoints = c.members.map((m) => m.clientHostPort).join(',');
    const moved = await etcdctl(['move-leader', BigInt(oldLeader.id).toString(16)], { endpoint: endpoints });
    expect(moved.code, `move-leader: ${moved.stderr}`).toBe(0);
    expect(moved.stdout).toMatch(
      new RegExp(`^Leadership transferred from ${BigInt(newLeader.id).toString(16)} to ${BigInt(oldLeader.id).toString(16)}`),
    );
    const back = await c.waitLeader({ timeoutMs: 10 * ELECTION_TIMEOUT_MS });
    expect(back).toBe(oldLeader);
    expect((await back.status()).raftTerm).toBe(newTerm + 1);
    await back.client().unary('KV', 'Put', { key: Buffer.from('after/move'), value: Buffer.from('ok') }, 5_000);

    console.log(
      `[cluster-pause] paused leader ${oldLeader.name} (term ${oldTerm}) for ${PAUSE_MS} ms: ${newLeader.name} led term ${newTerm} ` +
        `after ${electedAfterMs} ms, ${ackedDuringPause} writes acked during the pause; resumed old leader: read ${readOutcome}, ` +
        `following the new leader after ${rejoinedAfterMs} ms (leader-change log: ${stepDownLogged}); ` +
        `${log.acked.size} acked, ${log.failures} failed`,
    );
  }, 80_000);
});
