// Membership changes with etcdctl while writes run: add a member and start it with
// --initial-cluster-state existing, add a learner and promote it once caught up, update a
// member's peer URLs, remove a follower, then the leader. `member list` and `endpoint status`
// agree across members, and no acknowledged write is lost.
import { afterAll, describe, expect, it } from 'vitest';
import { Cluster, ClusterMember, lostWrites, readPrefix, WriteLoad } from '../helpers/cluster';
import { etcdctl, RunResult } from '../helpers/etcdctl';
import { sampleValue, scrapeMetrics } from '../helpers/prom';
import { TcpProxy } from '../helpers/proxy';
import { sleepMs, waitFor } from '../helpers/wait';

const ELECTION_TIMEOUT_MS = 1_000;

let cluster: Cluster | undefined;
let extraProxy: TcpProxy | undefined;
afterAll(async () => {
  await cluster?.close();
  await extraProxy?.close();
}, 30_000);

function ok(r: RunResult, what: string): string {
  if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}): ${r.stderr.trim()} ${r.stdout.trim()}`);
  return r.stdout;
}

/**
 * etcd refuses reconfiguration until the members have been connected for a while ("unhealthy
 * cluster", its strict reconfig check); retry that one refusal, bounded.
 */
async function reconfigure(args: string[], endpoint: ClusterMember, what: string): Promise<string> {
  let last: RunResult | undefined;
  await waitFor(
    what,
    async () => {
      last = await etcdctl(args, { endpoint: endpoint.clientHostPort });
      if (last.code === 0) return true;
      if (/unhealthy cluster/.test(last.stderr)) return false;
      throw new Error(`${what} failed (exit ${last.code}): ${last.stderr.trim()}`);
    },
    { timeoutMs: 20_000, intervalMs: 500 },
  ).catch((e: Error) => {
    throw new Error(`${e.message}; last stderr: ${last?.stderr.trim()}`);
  });
  return last!.stdout;
}

interface ListedMember {
  id: string;
  status: string;
  name: string;
  peerUrls: string;
  clientUrls: string;
  isLearner: boolean;
}

/** An unlabelled series of a member's /metrics, or undefined when absent. */
async function metricValue(m: ClusterMember, name: string): Promise<number | undefined> {
  return sampleValue(await scrapeMetrics(m.clientUrl), name);
}

/** `etcdctl member list` (simple format: id, status, name, peer URLs, client URLs, is learner). */
async function memberList(endpoint: ClusterMember): Promise<ListedMember[]> {
  const out = ok(await etcdctl(['member', 'list'], { endpoint: endpoint.clientHostPort }), `member list on ${endpoint.name}`);
  return out
    .trim()
    .split('\n')
    .map((line) => {
      const f = line.split(', ');
      expect(f.length, `member list line "${line}"`).toBe(6);
      return { id: f[0]!, status: f[1]!, name: f[2]!, peerUrls: f[3]!, clientUrls: f[4]!, isLearner: f[5] === 'true' };
    })
    .sort((a, b) => a.id.localeCompare(b.id));
}

function hexId(decimal: string): string {
  return BigInt(decimal).toString(16);
}

describe('3-member cluster: membership changes with etcdctl under load', () => {
  it('add, add learner + promote, update, remove a follower, remove the leader', async () => {
    cluster = await Cluster.start({ size: 3, args: [`--election-timeout=${ELECTION_TIMEOUT_MS}`, '--heartbeat-interval=100'] });
    const c = cluster;
    const removed = new Set<ClusterMember>();
    const load = new WriteLoad('load/', () => c.up().filter((m) => !removed.has(m)), { writers: 2, putDeadlineMs: 3_000 }).start();
    const timeline: string[] = [];
    const leader0 = await c.waitLeader();
    const follower0 = c.members.find((m) => m !== leader0)!;

    // ---- member add + start with --initial-cluster-state existing
    const m3 = await c.prepareMember();
    const addOut = await reconfigure(['member', 'add', m3.name, `--peer-urls=${m3.peerUrl}`], follower0, 'member add');
    expect(addOut).toMatch(/^Member +[0-9a-f]+ added to cluster +[0-9a-f]+/);
    const initialCluster = /ETCD_INITIAL_CLUSTER="([^"]+)"/.exec(addOut)?.[1];
    expect(initialCluster).toBeDefined();
    expect(addOut).toContain('ETCD_INITIAL_CLUSTER_STATE="existing"');
    // etcd lists the new member under its name, the others under theirs.
    for (const m of [...c.members, m3]) expect(initialCluster).toContain(`${m.name}=${m.peerUrl}`);
    c.members.push(m3);
    m3.launch(initialCluster!, 'existing', c.token, c.opts.args);
    await m3.waitReady(20_000);
    await m3.status();
    await waitFor('m3 listed as started on every member', async () => {
      for (const m of c.up()) {
        const l = await memberList(m);
        const e = l.find((x) => x.id === hexId(m3.id));
        if (!e || e.status !== 'started' || e.name !== m3.name || e.clientUrls !== m3.clientUrl) return false;
      }
      return true;
    }, { timeoutMs: 15_000, intervalMs: 300 });
    timeline.push(`added ${m3.name}`);

    // ---- learner: add, start, promote once it is in sync
    const m4 = await c.prepareMember();
    const learnerOut = await reconfigure(['member', 'add', m4.name, `--peer-urls=${m4.peerUrl}`, '--learner'], leader0, 'member add --learner');
    expect(learnerOut).toMatch(/^Member +[0-9a-f]+ added to cluster +[0-9a-f]+/);
    const learnerId = /^Member +([0-9a-f]+) added/.exec(learnerOut)![1]!;
    const learnerCluster = /ETCD_INITIAL_CLUSTER="([^"]+)"/.exec(learnerOut)![1]!;
    c.members.push(m4);
    m4.launch(learnerCluster, 'existing', c.token, c.opts.args);
    // A learner does not serve linearizable reads; wait for its status instead.
    await waitFor('the learner to report a leader', async () => (await m4.status()).leader !== '0', { timeoutMs: 20_000, intervalMs: 200 });
    expect((await m4.status()).isLearner).toBe(true);
    expect(await metricValue(m4, 'etcd_server_is_learner')).toBe(1);
    const listedLearner = (await memberList(leader0)).find((x) => x.id === learnerId);
    expect(listedLearner?.isLearner).toBe(true);
    let promoteTries = 0;
    let promoteViaFollowerError = '';
    const promoteOut = await waitFor('member promote to succeed', async () => {
      promoteTries++;
      // etcd forwards a promote that reaches a follower to the leader (only it knows whether the
      // learner is in sync). Soft check, then through the leader so the sequence goes on.
      const leaderNow = await c.waitLeader({ among: c.members.filter((m) => m !== m4) });
      const via = c.members.find((m) => m !== leaderNow && m !== m4)!;
      let r = await etcdctl(['member', 'promote', learnerId], { endpoint: via.clientHostPort });
      if (/not leader/.test(r.stderr)) {
        promoteViaFollowerError = r.stderr.trim().split('\n').pop()!;
        r = await etcdctl(['member', 'promote', learnerId], { endpoint: leaderNow.clientHostPort });
      }
      if (r.code === 0) return r.stdout;
      // etcd refuses while the learner lags; anything else is a failure.
      if (!/can only promote a learner member which is in sync with leader|unhealthy cluster/.test(r.stderr)) throw new Error(`member promote: ${r.stderr.trim()}`);
      return undefined;
    }, { timeoutMs: 20_000, intervalMs: 300 });
    expect.soft(promoteViaFollowerError, 'member promote sent to a follower').toBe('');
    expect(promoteOut).toMatch(new RegExp(`^Member +${learnerId} promoted in cluster +[0-9a-f]+`));
    await waitFor('the promoted member to be a voter everywhere', async () => {
      for (const m of c.up()) if ((await memberList(m)).find((x) => x.id === learnerId)?.isLearner !== false) return false;
      return !(await m4.status()).isLearner;
    }, { timeoutMs: 15_000, intervalMs: 300 });
    timeline.push(`learner ${m4.name} promoted after ${promoteTries} tries`);
    expect(await metricValue(m4, 'etcd_server_is_learner')).toBe(0);
    // Counted once, by the leader that decided (refusals while it lagged count as failures).
    let promotions = 0;
    for (const m of c.up()) promotions += (await metricValue(m, 'etcd_server_learner_promote_successes')) ?? 0;
    expect(promotions).toBe(1);

    // ---- member update: a follower's peer URL moves to a second proxy in front of it
    const leader1 = await c.waitLeader();
    const updated = c.members.find((m) => m !== leader1 && m !== m3 && m !== m4)!;
    extraProxy = await TcpProxy.start({ targetPort: updated.listenPeerPort });
    const newPeerUrl = `http://127.0.0.1:${extraProxy.port}`;
    const updOut = ok(
      await etcdctl(['member', 'update', hexId(updated.id), `--peer-urls=${newPeerUrl}`], { endpoint: m3.clientHostPort }),
      'member update',
    );
    expect(updOut).toMatch(new RegExp(`^Member +${hexId(updated.id)} updated in cluster +[0-9a-f]+`));
    await waitFor('the new peer URL listed on every member', async () => {
      for (const m of c.up()) if ((await memberList(m)).find((x) => x.id === hexId(updated.id))?.peerUrls !== newPeerUrl) return false;
      return true;
    }, { timeoutMs: 15_000, intervalMs: 300 });
    // Peers now dial the updated URL.
    await waitFor('peers to connect to the updated peer URL', () => extraProxy!.connectionCount() > 0, { timeoutMs: 15_000 });
    timeline.push(`updated ${updated.name}'s peer URL`);

    // ---- remove a follower: it stops by itself
    const leader2 = await c.waitLeader();
    const victim = c.members.find((m) => m !== leader2 && m !== updated && m.up())!;
    removed.add(victim);
    const rmOut = await reconfigure(['member', 'remove', hexId(victim.id)], leader2, 'member remove (follower)');
    expect(rmOut).toMatch(new RegExp(`^Member +${hexId(victim.id)} removed from cluster +[0-9a-f]+`));
    // etcd's removed member learns of its removal (from the entry, or from peers refusing its
    // streams) and stops; soft, so the rest of the sequence still runs when it does not.
    const victimExited = await victim.waitExited(10_000);
    expect.soft(victimExited, `removed follower ${victim.name} exits by itself; its logs:\n${victim.logs().slice(-3000)}`).toBe(true);
    if (!victimExited) await victim.stop();
    timeline.push(`removed follower ${victim.name} (exited by itself: ${victimExited})`);

    // ---- remove the leader: the rest elect a new one
    const leader3 = await c.waitLeader({ among: c.up() });
    removed.add(leader3);
    const via = c.up().find((m) => m !== leader3)!;
    const rmLeaderOut = await reconfigure(['member', 'remove', hexId(leader3.id)], via, 'member remove (leader)');
    expect(rmLeaderOut).toMatch(new RegExp(`^Member +${hexId(leader3.id)} removed from cluster +[0-9a-f]+`));
    const leaderExited = await leader3.waitExited(10_000);
    expect.soft(leaderExited, `removed leader ${leader3.name} exits by itself; its logs:\n${leader3.logs().slice(-3000)}`).toBe(true);
    if (!leaderExited) await leader3.stop();
    const rest = c.up();
    expect(rest.length).toBe(3);
    const leader4 = await c.waitLeader({ among: rest, timeoutMs: 10 * ELECTION_TIMEOUT_MS });
    timeline.push(`removed leader ${leader3.name} (exited by itself: ${leaderExited}); ${leader4.name} leads`);

    await sleepMs(500);
    const log = await load.stop();
    await c.waitConverged(rest, 20_000);

    // ---- every remaining member tells the same story
    const lists = await Promise.all(rest.map((m) => memberList(m)));
    for (const l of lists) expect(l).toEqual(lists[0]);
    expect(lists[0]!.map((x) => x.name).sort()).toEqual(rest.map((m) => m.name).sort());
    expect(lists[0]!.every((x) => x.status === 'started' && !x.isLearner)).toBe(true);
    const statusOut = ok(
      await etcdctl(['endpoint', 'status'], { endpoint: rest.map((m) => m.clientHostPort).join(',') }),
      'endpoint status',
    );
    // endpoint, ID, version, db size, is leader, is learner, raft term, raft index, raft applied index, errors
    const rows = statusOut.trim().split('\n').map((l) => l.split(', '));
    expect(rows.length, statusOut).toBe(3);
    expect(rows.filter((r) => r[4] === 'true').map((r) => r[1])).toEqual([hexId(leader4.id)]);
    expect(new Set(rows.map((r) => r[6])).size, `one raft term:\n${statusOut}`).toBe(1);
    expect(rows.every((r) => r[5] === 'false')).toBe(true);
    for (const m of rest) {
      const all = await readPrefix(m.client(), 'load/');
      expect(lostWrites(log, all.kvs), `acknowledged writes lost on ${m.name}`).toEqual([]);
    }
    console.log(`[cluster-membership] ${timeline.join('; ')}; ${log.acked.size} puts acked, ${log.failures} failed ${JSON.stringify([...log.errors].slice(0, 5))}\n${statusOut}`);
  }, 85_000);
});
