// A rehearsal of what kind does with etcd, without Docker: kubeadm's certificates, kubeadm's
// exact etcd command line, kubelet's probes, kube-apiserver's mutual TLS and keepalive pings.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKubeadmPki, type KubeadmPki } from '../helpers/certs';
import {
  apiserverClient,
  httpGet,
  KubeClient,
  kubeadmEtcdArgs,
  memberSpecs,
  OUR_ETCD,
  REAL_ETCD,
  spawnEtcd,
  startKubeadmCluster,
  tempDataDir,
  waitServing,
  type KubeadmMemberSpec,
  type RunningEtcd,
} from '../helpers/kubeadm';
import { sleepMs, waitFor } from '../helpers/wait';

interface LogLine {
  level?: string;
  msg?: string;
  [k: string]: unknown;
}

function logLines(text: string): LogLine[] {
  const out: LogLine[] = [];
  for (const l of text.split('\n')) {
    if (!l.startsWith('{')) continue;
    try {
      out.push(JSON.parse(l) as LogLine);
    } catch {
      // not a log line
    }
  }
  return out;
}

/** Output lines that are not a JSON object (the test helper's own "--- exit" line aside). */
function notJsonLines(text: string): string[] {
  return text.split('\n').filter((l) => {
    if (l === '' || l.startsWith('--- exit ')) return false;
    try {
      const v: unknown = JSON.parse(l);
      return typeof v !== 'object' || v === null || Array.isArray(v);
    } catch {
      return true;
    }
  });
}

/** A raw TCP connection that writes `payload` and resolves with what came back before close. */
function rawExchange(port: number, payload: Buffer, timeoutMs: number): Promise<{ closed: boolean; reply: Buffer; ms: number }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const chunks: Buffer[] = [];
    const s = net.connect(port, '127.0.0.1', () => s.write(payload));
    const done = (closed: boolean): void => {
      clearTimeout(timer);
      s.destroy();
      resolve({ closed, reply: Buffer.concat(chunks), ms: Date.now() - started });
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('close', () => done(true));
    s.on('error', () => done(true));
  });
}

/** HTTP/1.1 over TLS with a client certificate, as `curl --cacert --cert --key https://...`. */
function httpsGet(port: number, pki: KubeadmPki, pathname: string, post?: string, client = pki.healthcheckClient): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({
      port,
      host: '127.0.0.1',
      servername: 'localhost',
      ca: fs.readFileSync(pki.ca.cert),
      cert: fs.readFileSync(client.cert),
      key: fs.readFileSync(client.key),
      ALPNProtocols: ['http/1.1'],
    });
    let data = '';
    const timer = setTimeout(() => s.destroy(new Error('https GET timed out')), 5_000);
    s.on('secureConnect', () => {
      const head = `${post === undefined ? 'GET' : 'POST'} ${pathname} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n`;
      s.write(post === undefined ? `${head}\r\n` : `${head}Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(post)}\r\n\r\n${post}`);
    });
    s.setEncoding('utf8');
    s.on('data', (c: string) => {
      data += c;
    });
    s.on('end', () => {
      clearTimeout(timer);
      const m = /^HTTP\/1\.1 (\d+)/.exec(data);
      resolve({ status: m ? Number(m[1]) : 0, body: data.slice(data.indexOf('\r\n\r\n') + 4) });
    });
    s.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

describe('kubeadm stacked etcd (one control-plane member)', () => {
  let pki: KubeadmPki;
  let spec: KubeadmMemberSpec;
  let ours: RunningEtcd;
  let target: string;

  beforeAll(async () => {
    [spec] = (await memberSpecs(1)) as [KubeadmMemberSpec];
    pki = generateKubeadmPki([{ name: spec.name, ips: [spec.ip] }]);
    const dataDir = tempDataDir();
    // --grpc-keepalive-min-time scaled as the keepalive test below scales kube-apiserver's pings
    // (5 s and 30 s, 50x faster): the server enforces it, as etcd does.
    ours = spawnEtcd(OUR_ETCD, [...kubeadmEtcdArgs(spec, [spec], pki, dataDir, 'new'), '--grpc-keepalive-min-time=100ms']);
    target = `127.0.0.1:${spec.clientPort}`;
    await waitServing(ours, target, pki);
  });

  afterAll(async () => {
    await ours?.stop();
    if (pki) fs.rmSync(pki.dir, { recursive: true, force: true });
  });

  it('starts with the exact command line and logs each flag it does not act on once, by name', () => {
    const lines = logLines(ours.logs());
    const ignored = lines.filter((l) => l.msg === 'flag accepted but not acted on').map((l) => String(l['flag']));
    expect(new Set(ignored).size).toBe(ignored.length);
    // TLS is acted on now; these must not be reported as ignored.
    for (const f of ['cert-file', 'key-file', 'trusted-ca-file', 'client-cert-auth', 'peer-cert-file', 'peer-client-cert-auth']) {
      expect(ignored).not.toContain(f);
    }
    expect(lines.some((l) => l.msg === 'starting with client TLS')).toBe(true);
    expect(lines.some((l) => l.msg === 'serving client traffic securely')).toBe(true);
  });

  it('serves kube-apiserver over mutual TLS on both listen-client-urls', async () => {
    for (const host of ['127.0.0.1', spec.ip]) {
      const c = apiserverClient(`${host}:${spec.clientPort}`, pki);
      try {
        const put = await c.unary('KV', 'Put', { key: Buffer.from(`/registry/probe/${host}`), value: Buffer.from('x') });
        expect(Number((put['header'] as { revision: string }).revision)).toBeGreaterThan(0);
      } finally {
        c.close();
      }
    }
  });

  it("with auth enabled, takes the client certificate's CN as the user (etcd's CN auth)", async () => {
    const c = apiserverClient(target, pki);
    const b = (x: string): Buffer => Buffer.from(x);
    let rootToken = '';
    try {
      await c.unary('Auth', 'UserAdd', { name: 'root', password: 'rootpw' });
      await c.unary('Auth', 'UserGrantRole', { user: 'root', role: 'root' });
      await c.unary('Auth', 'UserAdd', { name: 'kube-apiserver-etcd-client', password: 'unused' });
      await c.unary('Auth', 'RoleAdd', { name: 'registry' });
      await c.unary('Auth', 'RoleGrantPermission', { name: 'registry', perm: { permType: 'Readwrite', key: b('/registry/'), range_end: b('/registry0') } });
      await c.unary('Auth', 'UserGrantRole', { user: 'kube-apiserver-etcd-client', role: 'registry' });
      await c.unary('Auth', 'AuthEnable', {});
      rootToken = String((await c.unary('Auth', 'Authenticate', { name: 'root', password: 'rootpw' }))['token']);
      // No token: the certificate alone says who this is.
      await c.unary('KV', 'Put', { key: b('/registry/cn-auth'), value: b('v') });
      const r = await c.unary('KV', 'Range', { key: b('/registry/cn-auth') });
      expect((r['kvs'] as unknown[]).length).toBe(1);
      const denied = await c.unary('KV', 'Put', { key: b('/elsewhere'), value: b('v') }).then(
        () => undefined,
        (e: grpc.ServiceError) => e,
      );
      expect(denied?.details).toBe('etcdserver: permission denied');
    } finally {
      if (rootToken !== '') {
        const md = new grpc.Metadata();
        md.set('token', rootToken);
        await c.unary('Auth', 'AuthDisable', {}, 10_000, md);
      }
      c.close();
    }
  });

  it('refuses clients without a certificate or with one from another CA, and says why in the log', async () => {
    const cases: Array<{ name: string; client: KubeClient }> = [
      { name: 'no certificate', client: new KubeClient(target, { ca: pki.ca.cert }) },
      { name: 'unknown CA', client: new KubeClient(target, { ca: pki.ca.cert, client: pki.strangerClient }) },
    ];
    for (const { name, client } of cases) {
      try {
        const err = await client.unary('KV', 'Range', { key: Buffer.from('a') }, 3_000).then(
          () => undefined,
          (e: grpc.ServiceError) => e,
        );
        expect(err, name).toBeDefined();
        expect(err!.code, name).toBe(grpc.status.UNAVAILABLE);
      } finally {
        client.close();
      }
    }
    await waitFor('rejected connection warnings', () => {
      const rejected = logLines(ours.logs()).filter((l) => l.msg === 'rejected connection' && l.level === 'warn');
      return rejected.length >= 2 ? rejected : undefined;
    });
  });

  it('refuses plain-text clients on the TLS port at once instead of hanging', async () => {
    const h1 = await rawExchange(spec.clientPort, Buffer.from('GET /health HTTP/1.1\r\nHost: x\r\n\r\n'), 5_000);
    expect(h1.closed).toBe(true);
    expect(h1.ms).toBeLessThan(3_000);
    const h2 = await rawExchange(spec.clientPort, Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), 5_000);
    expect(h2.closed).toBe(true);
    const plain = new KubeClient(target, 'insecure');
    try {
      const err = await plain.unary('KV', 'Range', { key: Buffer.from('a') }, 3_000).then(
        () => undefined,
        (e: grpc.ServiceError) => e,
      );
      expect(err?.code).toBe(grpc.status.UNAVAILABLE);
    } finally {
      plain.close();
    }
    const lines = logLines(ours.logs()).filter((l) => l.msg === 'rejected connection');
    expect(lines.some((l) => String(l['error']).includes('first record does not look like a TLS handshake'))).toBe(true);
  });

  it('answers HTTP/1.1 over TLS on the client port (curl with the healthcheck-client certificate)', async () => {
    const h = await httpsGet(spec.clientPort, pki, '/health');
    expect(h.status).toBe(200);
    expect(JSON.parse(h.body)).toMatchObject({ health: 'true' });
    const v = await httpsGet(spec.clientPort, pki, '/version');
    expect(v.status).toBe(200);
    expect(JSON.parse(v.body)).toHaveProperty('etcdserver');
    // The JSON gateway reaches gRPC from behind TLS too.
    const put = await httpsGet(spec.clientPort, pki, '/v3/kv/put', JSON.stringify({ key: Buffer.from('/gw/k').toString('base64'), value: Buffer.from('v').toString('base64') }));
    expect(put.status, put.body).toBe(200);
    const got = await httpsGet(spec.clientPort, pki, '/v3/kv/range', JSON.stringify({ key: Buffer.from('/gw/k').toString('base64') }));
    expect(got.status, got.body).toBe(200);
    const text = got.body.includes('\r\n') ? got.body.split('\r\n').filter((l) => l.startsWith('{')).join('') : got.body;
    expect(Buffer.from((JSON.parse(text) as { kvs: Array<{ value: string }> }).kvs[0]!.value, 'base64').toString()).toBe('v');
  });

  it("passes kubelet's liveness, readiness and startup probes on the metrics URL", async () => {
    const base = `http://127.0.0.1:${spec.metricsPort}`;
    const livez = await httpGet(`${base}/livez`);
    expect(livez.status).toBe(200);
    expect(livez.body.trim()).toBe('ok');
    const readyz = await httpGet(`${base}/readyz`);
    expect(readyz.status).toBe(200);
    expect(readyz.body.trim()).toBe('ok');
    const verbose = await httpGet(`${base}/readyz?verbose`);
    expect(verbose.status).toBe(200);
    expect(verbose.body).toContain('[+]linearizable_read ok');
    expect(verbose.body).toContain('ok');
    const h1 = await httpGet(`${base}/health?exclude=NOSPACE&serializable=true`);
    expect(h1.status).toBe(200);
    expect(JSON.parse(h1.body)).toEqual({ health: 'true', reason: '' });
    const h2 = await httpGet(`${base}/health?serializable=false`);
    expect(h2.status).toBe(200);
    const metrics = await httpGet(`${base}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.body).toContain('etcd_server_has_leader 1');
  });

  it('keeps a client that pings every 30 s (scaled: 600 ms) connected, its watch alive', async () => {
    // kube-apiserver: keepalive time 30 s against etcd's 5 s minimum; same ratio, 50x faster.
    // No pings without a call open: clientv3's PermitWithoutStream defaults to false, and
    // kube-apiserver leaves it so; etcd would send a client pinging an idle connection away.
    const c = apiserverClient(target, pki, { 'grpc.keepalive_time_ms': 600, 'grpc.keepalive_timeout_ms': 2_000, 'grpc.keepalive_permit_without_calls': 0 });
    try {
      await c.unary('KV', 'Range', { key: Buffer.from('a') });
      const w = c.bidi('Watch', 'Watch');
      const got: Record<string, unknown>[] = [];
      let streamErr: Error | undefined;
      w.on('data', (m: Record<string, unknown>) => got.push(m));
      w.on('error', (e: Error) => {
        streamErr = e;
      });
      w.write({ create_request: { key: Buffer.from('/registry/ka'), start_revision: '0' } });
      await waitFor('watch created', () => got.some((m) => m['created'] === true));
      await sleepMs(4_000);
      expect(streamErr).toBeUndefined();
      expect(c.channelState()).toBe(grpc.connectivityState.READY);
      await c.unary('KV', 'Put', { key: Buffer.from('/registry/ka'), value: Buffer.from('1') });
      await waitFor('event after pings', () => got.some((m) => Array.isArray(m['events']) && (m['events'] as unknown[]).length > 0));
      w.end();
    } finally {
      c.close();
    }
  }, 20_000);
});

describe('NOSPACE alarm and the health probes, ours and the real etcd', () => {
  for (const [label, bin, style] of [
    ['ours', OUR_ETCD, 'new'],
    ['real etcd 3.4', REAL_ETCD, 'old'],
  ] as const) {
    it(`${label}: /health fails with the alarm unless excluded`, async () => {
      if (bin === REAL_ETCD && !fs.existsSync(REAL_ETCD)) return;
      const [spec] = (await memberSpecs(1)) as [KubeadmMemberSpec];
      const pki = generateKubeadmPki([{ name: spec.name, ips: [spec.ip] }]);
      const e = spawnEtcd(bin, kubeadmEtcdArgs(spec, [spec], pki, tempDataDir(), style));
      const target = `127.0.0.1:${spec.clientPort}`;
      try {
        await waitServing(e, target, pki);
        const c = apiserverClient(target, pki);
        const st = await c.unary('Maintenance', 'Status', {});
        await c.unary('Maintenance', 'Alarm', { action: 1 /* Activate */, memberID: (st['header'] as { member_id: string }).member_id, alarm: 1 /* NOSPACE */ });
        c.close();
        const base = `http://127.0.0.1:${spec.metricsPort}`;
        const bad = await httpGet(`${base}/health`);
        expect(bad.status).toBe(503);
        expect(JSON.parse(bad.body)).toMatchObject({ health: 'false' });
        const excluded = await httpGet(`${base}/health?exclude=NOSPACE&serializable=true`);
        expect(excluded.status).toBe(200);
        if (bin === OUR_ETCD) {
          expect(JSON.parse(bad.body)).toEqual({ health: 'false', reason: 'ALARM NOSPACE' });
          // kubelet's liveness probe does not look at alarms; readiness neither (only corruption).
          expect((await httpGet(`${base}/livez`)).status).toBe(200);
        }
      } finally {
        await e.stop();
        fs.rmSync(pki.dir, { recursive: true, force: true });
      }
    });
  }
});

describe('https:// metrics URL', () => {
  it('serves the probes over TLS with the client certificate rules', async () => {
    const [spec] = (await memberSpecs(1)) as [KubeadmMemberSpec];
    const pki = generateKubeadmPki([{ name: spec.name, ips: [spec.ip] }]);
    const args = kubeadmEtcdArgs(spec, [spec], pki, tempDataDir(), 'new').map((a) =>
      a.startsWith('--listen-metrics-urls=') ? `--listen-metrics-urls=https://127.0.0.1:${spec.metricsPort}` : a,
    );
    const e = spawnEtcd(OUR_ETCD, args);
    try {
      await waitServing(e, `127.0.0.1:${spec.clientPort}`, pki);
      const r = await httpsGet(spec.metricsPort, pki, '/readyz');
      expect(r.status).toBe(200);
      // With TLS 1.3 the client may finish its side before the server refuses: no answer either way.
      const stranger = await httpsGet(spec.metricsPort, pki, '/readyz', undefined, pki.strangerClient).then(
        (x) => (x.status === 0 ? 'refused' : 'answered'),
        () => 'refused',
      );
      expect(stranger).toBe('refused');
      const plain = await httpGet(`http://127.0.0.1:${spec.metricsPort}/readyz`, 3_000).then(
        () => 'answered',
        () => 'refused',
      );
      expect(plain).toBe('refused');
    } finally {
      await e.stop();
      fs.rmSync(pki.dir, { recursive: true, force: true });
    }
  });
});

describe('--auto-tls', () => {
  it('generates a self-signed certificate under data-dir/fixtures/client and serves TLS with it', async () => {
    const [spec] = (await memberSpecs(1)) as [KubeadmMemberSpec];
    const dataDir = tempDataDir();
    const url = `https://127.0.0.1:${spec.clientPort}`;
    const e = spawnEtcd(OUR_ETCD, [
      '--name=auto',
      `--data-dir=${dataDir}`,
      '--auto-tls',
      `--listen-client-urls=${url}`,
      `--advertise-client-urls=${url}`,
      `--listen-peer-urls=http://127.0.0.1:${spec.peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${spec.peerPort}`,
      `--initial-cluster=auto=http://127.0.0.1:${spec.peerPort}`,
    ]);
    try {
      await waitFor(
        'TLS Range with an unverified server certificate',
        async () => {
          const creds = grpc.credentials.createSsl(null, null, null, { rejectUnauthorized: false, checkServerIdentity: () => undefined });
          const c = new grpc.Client(`127.0.0.1:${spec.clientPort}`, creds);
          try {
            await new Promise<void>((resolve, reject) => c.waitForReady(Date.now() + 1_000, (err) => (err ? reject(err) : resolve())));
            return true;
          } finally {
            c.close();
          }
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      const cert = path.join(dataDir, 'fixtures', 'client', 'cert.pem');
      expect(fs.existsSync(cert)).toBe(true);
      expect(fs.existsSync(path.join(dataDir, 'fixtures', 'client', 'key.pem'))).toBe(true);
      const x = new (await import('node:crypto')).X509Certificate(fs.readFileSync(cert));
      expect(x.subject).toContain('O=etcd');
      expect(x.subjectAltName).toContain('IP Address:127.0.0.1');
    } finally {
      await e.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

/** Three control-plane nodes: Raft between processes over https:// peers with --peer-client-cert-auth. KUBEADM_HA=0 leaves it out. */
describe.runIf(process.env['KUBEADM_HA'] !== '0').each(
  [
    { label: 'ours', bin: OUR_ETCD, style: 'new' as const },
    { label: 'real etcd', bin: REAL_ETCD, style: 'old' as const },
  ].filter((t) => fs.existsSync(t.bin)),
)('kubeadm stacked etcd on three control-plane nodes: $label', ({ bin, style }) => {
  it('forms one cluster over mutual-TLS peers; every member passes the probes and serves the same data', async () => {
    const cluster = await startKubeadmCluster(bin, 3, style, generateKubeadmPki);
    const clients = cluster.targets.map((t) => apiserverClient(t, cluster.pki));
    try {
      const list = await clients[0]!.unary('Cluster', 'MemberList', {});
      const members = list['members'] as Array<{ name: string; peerURLs: string[]; clientURLs: string[] }>;
      expect(members.map((m) => m.name).sort()).toEqual(cluster.specs.map((s) => s.name).sort());
      for (const m of members) expect(m.peerURLs.every((u) => u.startsWith('https://'))).toBe(true);
      const put = await clients[1]!.unary('KV', 'Put', { key: Buffer.from('/registry/ha/k'), value: Buffer.from('v') });
      const rev = Number((put['header'] as { revision: string }).revision);
      for (const c of clients) {
        const r = await c.unary('KV', 'Range', { key: Buffer.from('/registry/ha/k') });
        expect(Number((r['header'] as { revision: string }).revision)).toBeGreaterThanOrEqual(rev);
        expect(((r['kvs'] as Array<{ value: Buffer }>)[0]!.value).toString()).toBe('v');
      }
      for (const s of cluster.specs) {
        const base = `http://127.0.0.1:${s.metricsPort}`;
        expect((await httpGet(`${base}/health?serializable=false`)).status).toBe(200);
        if (bin === OUR_ETCD) {
          expect((await httpGet(`${base}/livez`)).status).toBe(200);
          expect((await httpGet(`${base}/readyz`)).status).toBe(200);
        }
      }
      if (bin === OUR_ETCD) {
        // Log shippers read one JSON object per line: nothing else on stdout or stderr (Node's
        // own warnings included: dialling https:// peers by IP raised one).
        for (const m of cluster.members) expect(notJsonLines(m.logs())).toEqual([]);
      }
    } finally {
      for (const c of clients) c.close();
      await cluster.stop();
    }
  }, 120_000);
});

/** A TCP relay that can go silent (a dead client: its packets stop, its socket stays open). */
async function frozenRelay(targetPort: number): Promise<{ port: number; freeze(): void; close(): void }> {
  const pairs: Array<[net.Socket, net.Socket]> = [];
  const srv = net.createServer((down) => {
    const up = net.connect(targetPort, '127.0.0.1');
    down.pipe(up);
    up.pipe(down);
    down.on('error', () => up.destroy());
    up.on('error', () => down.destroy());
    pairs.push([down, up]);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  return {
    port: (srv.address() as net.AddressInfo).port,
    freeze: () => {
      for (const [down, up] of pairs) {
        down.unpipe(up);
        up.unpipe(down);
        down.pause();
        up.pause();
      }
    },
    close: () => {
      for (const [down, up] of pairs) {
        down.destroy();
        up.destroy();
      }
      srv.close();
    },
  };
}

/** Watch streams the server has finished (any code), from go-grpc-prometheus's counter. */
function watchStreamsHandled(metricsText: string): number {
  let n = 0;
  for (const m of metricsText.matchAll(/^grpc_server_handled_total\{([^}]*)\} (\S+)$/gm)) {
    if (m[1]!.includes('grpc_method="Watch"') && m[1]!.includes('grpc_service="etcdserverpb.Watch"')) n += Number(m[2]);
  }
  return n;
}

// etcd 3.4 serves gRPC over TLS through Go's HTTP handler, which has no gRPC keepalive: the real
// etcd keeps a dead TLS client's streams until TCP gives up. We ping as --grpc-keepalive-* say.
describe('dead clients', () => {
  it('are detected with keepalive pings and their watch streams released', async () => {
    const [spec] = (await memberSpecs(1)) as [KubeadmMemberSpec];
    const pki = generateKubeadmPki([{ name: spec.name, ips: [spec.ip] }]);
    const args = [...kubeadmEtcdArgs(spec, [spec], pki, tempDataDir(), 'new'), '--grpc-keepalive-interval=500ms', '--grpc-keepalive-timeout=500ms'];
    const e = spawnEtcd(OUR_ETCD, args);
    const metricsUrl = `http://127.0.0.1:${spec.metricsPort}/metrics`;
    try {
      await waitServing(e, `127.0.0.1:${spec.clientPort}`, pki);
      const relay = await frozenRelay(spec.clientPort);
      // The certificate names localhost; the relay is another port on 127.0.0.1.
      const c = apiserverClient(`127.0.0.1:${relay.port}`, pki, { 'grpc.ssl_target_name_override': 'localhost' });
      try {
        const w = c.bidi('Watch', 'Watch');
        w.on('error', () => undefined);
        const created = new Promise<void>((resolve) => w.on('data', (m: Record<string, unknown>) => m['created'] === true && resolve()));
        w.write({ create_request: { key: Buffer.from('/registry/dead') } });
        await created;
        const before = watchStreamsHandled((await httpGet(metricsUrl)).body);
        relay.freeze();
        await waitFor('the watch stream released', async () => watchStreamsHandled((await httpGet(metricsUrl)).body) > before, {
          timeoutMs: 15_000,
          intervalMs: 200,
        });
      } finally {
        c.close();
        relay.close();
      }
    } finally {
      await e.stop();
      fs.rmSync(pki.dir, { recursive: true, force: true });
    }
  }, 60_000);
});
