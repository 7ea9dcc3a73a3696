// Lease calls a follower forwards to the leader, with auth on: the caller's permissions are
// checked where the call arrives, and the leader answers the forwarded part. Through etcdctl, on
// ours and the real etcd 3.4, 3.6 and 3.7 alike: grant, attach a key, time-to-live with its keys, one
// keepalive and the lease list, all sent to a follower as root. Then, on ours, 3.6 and 3.7 (3.4
// answers anyone): what the follower refuses to nobody and to users without permission on the
// lease's keys, in etcd 3.6's words, while the leader answers what the follower forwards.
import { afterEach, describe, expect, it } from 'vitest';
import { Cluster } from '../helpers/cluster';
import { etcdctl } from '../helpers/etcdctl';
import { referenceEtcd } from '../helpers/reference';

const ETCDCTL_36 = referenceEtcd('3.6').etcdctl;

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

describe.each(SERVERS.filter(([name]) => name !== 'etcd 3.4'))('lease calls through a follower with auth on, as etcd 3.6 checks them: %s', (_name, bin) => {
  it('refuses nobody, and users who may not read or write the lease\'s keys, on the follower', { timeout: 90_000 }, async () => {
    cluster = await Cluster.start({ bin, args: ['--bcrypt-cost=4'] });
    const leader = await cluster.waitLeader();
    const f = cluster.members.find((m) => m !== leader)!;
    const run = (args: string[], user?: string) =>
      etcdctl(user === undefined ? args : [`--user=${user}:pw`, ...args], { endpoint: f.clientHostPort, bin: ETCDCTL_36 });
    const ok = async (args: string[], user?: string): Promise<string> => {
      const r = await run(args, user);
      expect(r.code, `etcdctl ${args.join(' ')} as ${user}: ${r.stderr}`).toBe(0);
      return r.stdout.trim();
    };
    /** etcdctl's last line on stderr for a refused call ("Error: <etcd's text>"). */
    const refused = async (args: string[], user?: string): Promise<string> => {
      const r = await run(args, user);
      expect(r.code, `etcdctl ${args.join(' ')} as ${user} should fail: ${r.stdout}`).not.toBe(0);
      return r.stderr.trim().split('\n').at(-1)!;
    };
    await ok(['user', 'add', 'root', '--new-user-password=pw', '--interactive=false']);
    for (const u of ['reader', 'writer', 'nobody']) await ok(['user', 'add', u, '--new-user-password=pw', '--interactive=false']);
    await ok(['role', 'add', 'r']);
    await ok(['role', 'add', 'w']);
    await ok(['role', 'grant-permission', 'r', 'read', 'k']);
    await ok(['role', 'grant-permission', 'w', 'write', 'k']);
    await ok(['user', 'grant-role', 'reader', 'r']);
    await ok(['user', 'grant-role', 'writer', 'w']);
    await ok(['auth', 'enable']);
    const id = /^lease ([0-9a-f]+) granted/.exec(await ok(['lease', 'grant', '600'], 'root'))?.[1];
    expect(id).toBeDefined();
    await ok(['put', 'k', 'v', `--lease=${id}`], 'root');

    // Nobody: every lease call (3.4 answered them all).
    const EMPTY = 'Error: etcdserver: user name is empty';
    expect(await refused(['lease', 'grant', '60'])).toBe('Error: failed to grant lease (etcdserver: user name is empty)');
    expect(await refused(['lease', 'timetolive', id!])).toBe(EMPTY);
    expect(await refused(['lease', 'timetolive', id!, '--keys'])).toBe(EMPTY);
    expect(await refused(['lease', 'keep-alive', '--once', id!])).toBe(EMPTY);
    expect(await refused(['lease', 'list'])).toBe(EMPTY);
    expect(await refused(['lease', 'revoke', id!])).toBe('Error: failed to revoke lease (etcdserver: user name is empty)');

    // A user with no permission: a grant and a time-to-live without keys, nothing that touches the keys.
    const DENIED = 'Error: etcdserver: permission denied';
    expect(await ok(['lease', 'grant', '60'], 'nobody')).toMatch(/^lease [0-9a-f]+ granted with TTL\(60s\)$/);
    expect(await ok(['lease', 'timetolive', id!], 'nobody')).toMatch(new RegExp(`^lease ${id} granted with TTL\\(600s\\), remaining\\(\\d+s\\)$`));
    expect(await refused(['lease', 'timetolive', id!, '--keys'], 'nobody')).toBe(DENIED);
    expect(await refused(['lease', 'keep-alive', '--once', id!], 'nobody')).toBe(DENIED);
    expect(await refused(['lease', 'list'], 'nobody')).toBe(DENIED);
    expect(await refused(['lease', 'revoke', id!], 'nobody')).toBe('Error: failed to revoke lease (etcdserver: permission denied)');

    // Read permission shows the keys and lists the leases; renewing and revoking need write permission.
    expect(await ok(['lease', 'timetolive', id!, '--keys'], 'reader')).toMatch(new RegExp(`^lease ${id} granted with TTL\\(600s\\), remaining\\(\\d+s\\), attached keys\\(\\[k\\]\\)$`));
    expect(await ok(['lease', 'list'], 'reader')).toContain(id!);
    expect(await refused(['lease', 'keep-alive', '--once', id!], 'reader')).toBe(DENIED);
    expect(await refused(['lease', 'revoke', id!], 'reader')).toBe('Error: failed to revoke lease (etcdserver: permission denied)');
    // Write permission: the other way round.
    expect(await refused(['lease', 'timetolive', id!, '--keys'], 'writer')).toBe(DENIED);
    expect(await ok(['lease', 'keep-alive', '--once', id!], 'writer')).toMatch(new RegExp(`^lease ${id} keepalived with TTL\\(600\\)$`));
    expect(await ok(['lease', 'revoke', id!], 'writer')).toBe(`lease ${id} revoked`);
  });
});
