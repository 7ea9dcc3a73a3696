// A three-member cluster's peer traffic counters, as Prometheus scrapes them from each member:
// etcd_network_peer_sent_bytes_total{To} and _received_bytes_total{From}, labelled with member
// IDs in hex, growing with the writes between two scrapes; the WAL fsync histogram, which
// counts fdatasyncs as etcd's does; a leader's late heartbeats; refused learner promotions;
// and the prober's etcd_network_peer_round_trip_time_seconds{To} with
// etcd_network_known_peers{Local,Remote}.
import { afterAll, describe, expect, it } from 'vitest';
import { Cluster, ClusterMember } from '../helpers/cluster';
import { etcdBin, REPO_ROOT } from '../helpers/etcd-process';
import { etcdctl } from '../helpers/etcdctl';
import { sampleValue, scrapeMetrics } from '../helpers/prom';
import { sleepMs, waitFor } from '../helpers/wait';

let cluster: Cluster | undefined;
afterAll(async () => {
  await cluster?.close();
}, 30_000);

const scrape = (m: ClusterMember): Promise<string> => scrapeMetrics(m.clientUrl);

/** The value of `name{label="value"}` in Prometheus text, or 0 when the series is absent. */
function series(text: string, name: string, label: string, value: string): number {
  return sampleValue(text, name, { [label]: value }) ?? 0;
}

const hex = (decimalId: string): string => BigInt(decimalId).toString(16);

/** The value of an unlabelled series (`name value`), or 0 when it is absent. */
function unlabelled(text: string, name: string): number {
  return sampleValue(text, name) ?? 0;
}

describe('3-member cluster: peer network metrics', () => {
  it('count bytes sent to and received from each peer, and keep counting across scrapes', async () => {
    cluster = await Cluster.start({ size: 3 });
    const leader = await cluster.waitLeader();
    const followers = cluster.members.filter((m) => m !== leader);
    const put = async (n: number, tag: string): Promise<void> => {
      for (let i = 0; i < n; i++) await leader.client().unary('KV', 'Put', { key: Buffer.from(`m/${tag}/${i}`), value: Buffer.alloc(1000, 1) }, 5_000);
    };
    await put(20, 'a');
    const first = await scrape(leader);
    const sentBefore = followers.map((f) => series(first, 'etcd_network_peer_sent_bytes_total', 'To', hex(f.id)));
    const receivedBefore = followers.map((f) => series(first, 'etcd_network_peer_received_bytes_total', 'From', hex(f.id)));
    // 20 puts of 1000-byte values went to each follower.
    for (const s of sentBefore) expect(s).toBeGreaterThan(20_000);
    for (const r of receivedBefore) expect(r).toBeGreaterThan(0);

    await put(20, 'b');
    const second = await scrape(leader);
    followers.forEach((f, i) => {
      expect(series(second, 'etcd_network_peer_sent_bytes_total', 'To', hex(f.id)) - sentBefore[i]!).toBeGreaterThan(20_000);
      expect(series(second, 'etcd_network_peer_received_bytes_total', 'From', hex(f.id))).toBeGreaterThan(receivedBefore[i]!);
    });
    // A follower counts what it got from the leader and what it answered.
    const f = await scrape(followers[0]!);
    expect(series(f, 'etcd_network_peer_received_bytes_total', 'From', hex(leader.id))).toBeGreaterThan(40_000);
    expect(series(f, 'etcd_network_peer_sent_bytes_total', 'To', hex(leader.id))).toBeGreaterThan(0);
  }, 60_000);

  it('observe the WAL fsync histogram once per fdatasync, not per save', async () => {
    const c = cluster!;
    const leader = await c.waitLeader();
    const count = (text: string): number => unlabelled(text, 'etcd_disk_wal_fsync_duration_seconds_count');
    const before = count(await scrape(leader));
    const puts = 50;
    for (let i = 0; i < puts; i++) await leader.client().unary('KV', 'Put', { key: Buffer.from(`f/${i}`), value: Buffer.from('v') }, 5_000);
    const synced = count(await scrape(leader)) - before;
    // One client, one write at a time: the leader makes each put durable on its own (one
    // fdatasync each); the save that only moves its commit index forward (one more per put)
    // needs none. (A follower may get two entries in one append when the other one acked first.)
    expect(synced).toBeGreaterThanOrEqual(puts);
    expect(synced).toBeLessThan(puts * 1.5);
  }, 60_000);

  it('count and log a heartbeat the leader sent late (its process stopped for four heartbeat intervals)', async () => {
    const c = cluster!;
    const leader = await c.waitLeader();
    const failures = (text: string): number => unlabelled(text, 'etcd_server_heartbeat_send_failures_total');
    const before = failures(await scrape(leader));
    // 400 ms: past twice the 100 ms heartbeat interval, short of the 1 s election timeout.
    leader.pause();
    try {
      await sleepMs(400);
    } finally {
      leader.resume();
    }
    await waitFor('a late heartbeat counted', async () => failures(await scrape(leader)) > before);
    // The log line travels through the child's stderr pipe, which may be read after the scrape's answer.
    const warning = await waitFor('the warning etcd logs', () =>
      leader
        .logs()
        .split('\n')
        .filter((l) => l.includes('"leader failed to send out heartbeat on time; took too long, leader is overloaded likely from slow disk"'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .at(-1),
    );
    expect(warning!['heartbeat-interval']).toBe('100ms');
    expect(warning!['expected-duration']).toBe('200ms');
  }, 60_000);

  it("count a refused learner promotion with etcd's reason", async () => {
    const c = cluster!;
    const leader = await c.waitLeader();
    const voter = c.members.find((m) => m !== leader)!;
    const r = await etcdctl(['member', 'promote', hex(voter.id)], { endpoint: leader.clientHostPort, timeoutMs: 15_000 });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('etcdserver: can only promote a learner member');
    const text = await scrape(leader);
    expect(text).toContain('etcd_server_learner_promote_failures{Reason="etcdserver: can only promote a learner member"} 1');
    expect(text).toContain('etcd_server_is_learner 0');
  }, 60_000);

  it('observe each peer\'s round-trip time and list every member as known', async () => {
    const c = cluster!;
    await c.waitLeader();
    for (const m of c.members) {
      const others = c.members.filter((o) => o !== m);
      // The first status check comes 5 s after a peer is added (etcd's statusErrorInterval).
      const text = await waitFor(
        `${m.name} to observe the round-trip time to both peers`,
        async () => {
          const t = await scrape(m);
          return others.every((o) => series(t, 'etcd_network_peer_round_trip_time_seconds_count', 'To', hex(o.id)) > 0) ? t : undefined;
        },
        { timeoutMs: 20_000, intervalMs: 250 },
      );
      for (const o of others) {
        const mean =
          series(text, 'etcd_network_peer_round_trip_time_seconds_sum', 'To', hex(o.id)) /
          series(text, 'etcd_network_peer_round_trip_time_seconds_count', 'To', hex(o.id));
        expect(mean).toBeGreaterThan(0);
        expect(mean).toBeLessThan(0.5);
      }
      // etcd_network_known_peers came with etcd 3.6 (its membership store); a run against the
      // etcd 3.4 (ETCD_BIN=/usr/bin/etcd) checks the round-trip times alone.
      if (!etcdBin().startsWith(REPO_ROOT)) continue;
      const known = text
        .split('\n')
        .filter((l) => l.startsWith('etcd_network_known_peers{'))
        .map((l) => /Local="([0-9a-f]+)",Remote="([0-9a-f]+)"} (\S+)$/.exec(l)?.slice(1))
        .sort();
      expect(known).toEqual(c.members.map((o) => [hex(m.id), hex(o.id), '1']).sort());
    }
  }, 90_000);
});
