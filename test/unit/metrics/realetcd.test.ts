import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { testTempDir } from '../../helpers/temp_dir';
import { createMetrics } from '../../../src/metrics';

const REAL_ETCD = '/usr/bin/etcd';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

function get(url: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    http
      .get(url, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve(res.statusCode === 200 ? body : undefined));
      })
      .on('error', () => resolve(undefined));
  });
}

function families(body: string) {
  const help = new Map<string, string>();
  const type = new Map<string, string>();
  for (const line of body.split('\n')) {
    const m = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line);
    if (m !== null) (m[1] === 'HELP' ? help : type).set(m[2], m[3]);
  }
  return { help, type };
}

describe('metrics compared with the real etcd', () => {
  it('every metric both export has the same type and help text', async () => {
    const dir = testTempDir('real-etcd-');
    const [clientPort, peerPort] = [await freePort(), await freePort()];
    const client = `http://127.0.0.1:${clientPort}`;
    const peer = `http://127.0.0.1:${peerPort}`;
    const proc = spawn(
      REAL_ETCD,
      [
        `--data-dir=${path.join(dir, 'data')}`,
        `--listen-client-urls=${client}`,
        `--advertise-client-urls=${client}`,
        `--listen-peer-urls=${peer}`,
        `--initial-advertise-peer-urls=${peer}`,
        `--initial-cluster=default=${peer}`,
      ],
      { stdio: 'ignore' },
    );
    let real: string | undefined;
    try {
      const deadline = Date.now() + 20_000;
      while (real === undefined && Date.now() < deadline) {
        real = await get(`${client}/metrics`);
        if (real === undefined) await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      proc.kill('SIGKILL');
    }
    expect(real).toBeDefined();
    const theirs = families(real ?? '');
    const ours = families((await createMetrics({ serverVersion: '3.6.14' }).metricsText()).body);
    let shared = 0;
    for (const [name, t] of ours.type) {
      if (!theirs.type.has(name)) continue;
      shared++;
      expect(t, name).toBe(theirs.type.get(name));
      expect(ours.help.get(name), name).toBe(theirs.help.get(name));
    }
    expect(shared).toBeGreaterThan(40);
  });
});
