// Lease calls a follower forwards to the leader, with auth on: the caller's permissions are
// checked where the call arrives, and the leader answers the forwarded part. Through etcdctl, on
// ours and the real etcd 3.4, 3.6 and 3.7 alike: grant, attach a key, time-to-live with its keys, one
// keepalive and the lease list, all sent to a follower as root.
import { afterEach, describe, expect, it } from 'vitest';
import { Cluster } from '../helpers/cluster';
import { etcdctl } from '../helpers/etcdctl';
import { referenceEtcd } from '../helpers/reference';

const SERVERS: Array<[string, string | undefined]> = [
  ['ours', undefined],
  ['etcd 3.4', '/usr/bin/etcd'],
  ['etcd 3.6', referenceEtcd('3.6').etcd],
  ['etcd 3.7', referenceEtcd('3.7').etcd],
];

let cluster: Cluster | null = null;
afterEach(async () => {
  await cluster?.close();
  cluster = null;
});

describe.each(SERVERS)('lease calls through a follower with auth on: %s', (_name, bin) => {
  it('answer as they do on the leader: keys listed, keepalive renewed', { timeout: 90_000 }, async () => {
    cluster = await Cluster.start({ bin });
    const leader = await cluster.waitLeader();
    const f = cluster.members.find((m) => m !== leader)!;
    const ctl = async (args: string[], user = true): Promise<string> => {
      const r = await etcdctl(user ? ['--user=root:pw', ...args] : args, { endpoint: f.clientHostPort });
      expect(r.code, `etcdctl ${args.join(' ')}: ${r.stderr}`).toBe(0);
      return r.stdout.trim();
    };
    await ctl(['user', 'add', 'root', '--new-user-password=pw', '--interactive=false'], false);
    await ctl(['auth', 'enable'], false);
    const granted = await ctl(['lease', 'grant', '60']);
    const id = /^lease ([0-9a-f]+) granted with TTL\(60s\)$/.exec(granted)?.[1];
    expect(id, granted).toBeDefined();
    await ctl(['put', 'leased-key', 'v', `--lease=${id}`]);
    expect(await ctl(['lease', 'timetolive', id!, '--keys'])).toMatch(new RegExp(`^lease ${id} granted with TTL\\(60s\\), remaining\\(\\d+s\\), attached keys\\(\\[leased-key\\]\\)$`));
    expect(await ctl(['lease', 'keep-alive', '--once', id!])).toMatch(new RegExp(`^lease ${id} keepalived with TTL\\(60\\)$`));
    expect(await ctl(['lease', 'list'])).toContain(id!);
  });
});
