// The reference etcd of today is usable: the real etcd 3.6 and 3.7 (built from Go modules by
// scripts/reference/install.sh, test/helpers/reference.ts) and our bin/etcd each start, and the
// real etcdctl 3.6 and 3.7 put and get against each of them.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdctl, runProcess } from '../helpers/etcdctl';
import { EtcdMember, REPO_ROOT, startEtcd } from '../helpers/etcd-process';
import { REFERENCE_LINES, referenceEtcd } from '../helpers/reference';

const servers: { label: string; bin: () => string; version?: () => string }[] = [
  { label: 'ours (bin/etcd)', bin: () => path.join(REPO_ROOT, 'bin', 'etcd') },
  ...REFERENCE_LINES.map((line) => ({
    label: `etcd ${line}`,
    bin: () => referenceEtcd(line).etcd,
    version: () => referenceEtcd(line).version.replace(/^v/, ''),
  })),
];

describe('reference binaries', () => {
  it.each(REFERENCE_LINES)('etcd, etcdctl, etcdutl and benchmark %s are the pinned version', async (line) => {
    const ref = referenceEtcd(line);
    const v = ref.version.replace(/^v/, '');
    const ctl = await etcdctl(['version'], { endpoint: '127.0.0.1:1', bin: ref.etcdctl });
    expect(ctl.code, ctl.stderr).toBe(0);
    expect(ctl.stdout).toBe(`etcdctl version: ${v}\nAPI version: ${line}\n`);
    const server = await runProcess(ref.etcd, ['--version'], {});
    expect(server.stdout).toContain(`etcd Version: ${v}\n`);
    const utl = await runProcess(ref.etcdutl, ['version'], {});
    expect(utl.stdout).toContain(`etcdutl version: ${v}\n`);
    const bench = await runProcess(ref.benchmark, ['--help'], {});
    expect(bench.stdout).toContain('benchmark is a low-level benchmark tool for etcd3');
  });
});

describe.each(servers)('$label', (server) => {
  let m: EtcdMember;
  beforeAll(async () => {
    m = await startEtcd({ bin: server.bin() });
  });
  afterAll(async () => {
    await m?.stop();
  });

  it.each(REFERENCE_LINES)('etcdctl %s puts and gets', async (line) => {
    const ctl = referenceEtcd(line).etcdctl;
    const run = async (args: string[]): Promise<string> => {
      const r = await etcdctl(args, { endpoint: m.clientHostPort, bin: ctl });
      if (r.code !== 0) throw new Error(`etcdctl ${line} ${args.join(' ')} exited ${r.code}: ${r.stderr}\n${m.logs().slice(-3000)}`);
      return r.stdout;
    };
    const key = `reference/${line}`;
    expect(await run(['put', key, `value from etcdctl ${line}`])).toBe('OK\n');
    expect(await run(['get', key])).toBe(`${key}\nvalue from etcdctl ${line}\n`);
    expect(await run(['get', 'reference/', '--prefix', '--keys-only'])).toContain(`${key}\n`);
    if (server.version) {
      // The member that answers is the build we meant to start.
      expect(await run(['endpoint', 'status', '-w', 'json'])).toContain(`"version":"${server.version()}"`);
    }
  });
});
