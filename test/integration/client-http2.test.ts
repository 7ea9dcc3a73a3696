// The client port's two HTTP/2 implementations, ours (src/h2, the default) and Node's http2
// under grpc-js (ETCDTS_CLIENT_HTTP2=node), each driven by the real etcdctl through what
// stresses a transport: a value larger than every flow-control window, a snapshot streamed
// back, a watch, and a URL endpoint (whose scheme Go's client puts in :authority).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientHttp2Impl } from '../../src/api/listener';
import { BackgroundEtcdctl, etcdctl } from '../helpers/etcdctl';
import { EtcdMember, startEtcd } from '../helpers/etcd-process';

describe('clientHttp2Impl', () => {
  it('is ours unless ETCDTS_CLIENT_HTTP2=node', () => {
    expect(clientHttp2Impl({})).toBe('lean');
    expect(clientHttp2Impl({ ETCDTS_CLIENT_HTTP2: 'node' })).toBe('node');
    expect(clientHttp2Impl({ ETCDTS_CLIENT_HTTP2: 'other' })).toBe('lean');
  });
});

describe.each([
  ['ours', {}],
  ['node', { ETCDTS_CLIENT_HTTP2: 'node' }],
])('client HTTP/2: %s', (_name, env) => {
  let m: EtcdMember;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'etcd-h2-'));
  beforeAll(async () => {
    m = await startEtcd({ env });
  });
  afterAll(async () => {
    await m?.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });
  const ok = async (args: string[], input?: string): Promise<string> => {
    const r = await etcdctl(args, { endpoint: m.clientUrl, input, timeoutMs: 30_000 });
    if (r.code !== 0) throw new Error(`etcdctl ${args[0]} exited ${r.code}: ${r.stderr}\n${m.logs().slice(-2000)}`);
    return r.stdout;
  };

  it('puts and reads back a 1 MiB value through a URL endpoint', async () => {
    const big = 'v'.repeat(1024 * 1024);
    // etcdctl takes the value from stdin when it is not an argument.
    expect(await ok(['put', 'h2/big'], big)).toBe('OK\n');
    const got = await ok(['get', 'h2/big', '--print-value-only']);
    expect(got.length).toBe(big.length + 1);
    expect(got.trimEnd() === big).toBe(true);
  });

  it('streams a snapshot of several MiB back whole', async () => {
    for (let i = 0; i < 4; i++) await ok(['put', `h2/fill/${i}`], 'x'.repeat(1024 * 1024));
    const file = path.join(tmp, 'snap.db');
    await ok(['snapshot', 'save', file]);
    // A stream cut short fails the command (ok() throws) or leaves the file short.
    expect(fs.statSync(file).size).toBeGreaterThan(4 * 1024 * 1024);
  });

  it('delivers a watch event', async () => {
    const w = new BackgroundEtcdctl(['watch', 'h2/w'], { endpoint: m.clientUrl });
    try {
      // The watch is registered once etcdctl's stream is open; keep putting until it reports.
      const deadline = Date.now() + 10_000;
      let seen = false;
      while (!seen && Date.now() < deadline) {
        await ok(['put', 'h2/w', 'val']);
        seen = /PUT\nh2\/w\nval/.test(w.stdout());
        if (!seen) await new Promise((r) => setTimeout(r, 100));
      }
      expect(seen).toBe(true);
    } finally {
      w.stop();
    }
  });

  it('answers several ranges of many keys at once, each whole', async () => {
    // Past its first 16 KiB, a range's keys are copied into pooled pieces that its encoding hands
    // back (src/pb/kv_wire.ts, WireRecords): one handed back early would show here as another
    // range's bytes (two prefixes of different values, read at once).
    const PREFIXES = ['h2/many/a/', 'h2/many/b/'];
    const valueOf = (p: string, i: number): string => `${p}${String(i).padStart(3, '0')}-`.repeat(80);
    const expected: Record<string, string> = {};
    for (const p of PREFIXES) {
      const keys = Array.from({ length: 100 }, (_, i) => [`${p}${String(i).padStart(3, '0')}`, valueOf(p, i)]);
      // etcdctl txn reads three sections (compares, success ops, failure ops), each ended by a blank line.
      expect(await ok(['txn'], `\n${keys.map(([k, v]) => `put ${k} ${v}`).join('\n')}\n\n\n`)).toContain('SUCCESS');
      expected[p] = keys.map(([k, v]) => `${k}\n${v}\n`).join('');
    }
    for (let round = 0; round < 2; round++) {
      const reads = [0, 1, 2, 3, 4, 5].map(async (i) => {
        const p = PREFIXES[i % PREFIXES.length]!;
        return [p, await ok(['get', p, '--prefix'])] as const;
      });
      for (const [p, out] of await Promise.all(reads)) expect(out === expected[p]).toBe(true);
    }
  });

  it('logs no warning about the environment', () => {
    expect(m.logs()).not.toContain('unrecognized environment variable');
  });
});
