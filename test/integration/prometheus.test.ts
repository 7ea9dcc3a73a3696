// A real Prometheus (Debian's package) scrapes our server with the configuration shipped in
// deploy/prometheus/, and the series an etcd dashboard and etcd's alerts use come back
// consistent with the load we sent. promtool lints our exposition against etcd's own and
// checks and unit-tests the alerting rules.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, startEtcd, type EtcdMember } from '../helpers/etcd-process';
import { EtcdGrpc, type Msg } from '../helpers/grpc';
import { freePort } from '../helpers/ports';
import { sleepMs, waitFor } from '../helpers/wait';

const PROMETHEUS = '/usr/bin/prometheus';
const PROMTOOL = '/usr/bin/promtool';
const REAL_ETCD = '/usr/bin/etcd';
const DEPLOY = path.join(REPO_ROOT, 'deploy', 'prometheus');
const STOP_GRACE_MS = 10_000;

function requireTool(bin: string): void {
  if (!fs.existsSync(bin)) throw new Error(`${bin} is missing: apt-get install -y prometheus (.ci/run installs it)`);
}

/** Runs promtool with `input` on stdin; bounded so a hung tool fails the test. */
function promtool(args: string[], input?: string): { status: number | null; out: string } {
  const r = spawnSync(PROMTOOL, args, { input, encoding: 'utf8', timeout: 60_000, cwd: DEPLOY });
  return { status: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

async function getText(url: string): Promise<string> {
  const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status}`);
  return res.text();
}

// ---------------------------------------------------------------- Prometheus process

interface PromSample {
  metric: Record<string, string>;
  value: [number, string];
}

class PrometheusProcess {
  private logs = '';
  private constructor(
    readonly url: string,
    private readonly proc: ChildProcess,
    private readonly dir: string,
  ) {}

  /** Starts Prometheus on loopback with the shipped config pointed at `target` and a 1 s interval. */
  static async start(target: string): Promise<PrometheusProcess> {
    requireTool(PROMETHEUS);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prom-it-'));
    const shipped = fs.readFileSync(path.join(DEPLOY, 'prometheus.yml'), 'utf8');
    const replaceOnce = (text: string, from: string, to: string): string => {
      const n = text.split(from).length - 1;
      if (n !== 1) throw new Error(`deploy/prometheus/prometheus.yml: expected "${from}" once, found ${n} times`);
      return text.replace(from, to);
    };
    let config = replaceOnce(shipped, 'scrape_interval: 15s', 'scrape_interval: 1s');
    config = replaceOnce(config, 'evaluation_interval: 15s', 'evaluation_interval: 1s');
    config = replaceOnce(config, '- localhost:2379', `- ${target}`);
    config = replaceOnce(config, '- alerts.yml', `- ${path.join(DEPLOY, 'alerts.yml')}`);
    const configFile = path.join(dir, 'prometheus.yml');
    fs.writeFileSync(configFile, config);

    const port = await freePort();
    const proc = spawn(
      PROMETHEUS,
      [
        `--config.file=${configFile}`,
        `--storage.tsdb.path=${path.join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], detached: true },
    );
    const p = new PrometheusProcess(`http://127.0.0.1:${port}`, proc, dir);
    const keep = (b: Buffer): void => {
      p.logs = (p.logs + b.toString('utf8')).slice(-64 * 1024);
    };
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    try {
      await waitFor('prometheus ready', async () => (await fetch(`${p.url}/-/ready`, { signal: AbortSignal.timeout(2000) })).status === 200, {
        timeoutMs: 30_000,
        intervalMs: 200,
      });
    } catch (e) {
      await p.stop();
      throw new Error(`${(e as Error).message}\n--- prometheus logs:\n${p.logs}`);
    }
    return p;
  }

  async query(expr: string): Promise<PromSample[]> {
    const res = await fetch(`${this.url}/api/v1/query?query=${encodeURIComponent(expr)}`, { signal: AbortSignal.timeout(10_000) });
    const body = (await res.json()) as { status: string; error?: string; data?: { resultType: string; result: PromSample[] } };
    if (body.status !== 'success' || body.data === undefined) throw new Error(`query ${expr}: ${body.error ?? res.status}`);
    if (body.data.resultType !== 'vector') throw new Error(`query ${expr}: ${body.data.resultType}, not a vector`);
    return body.data.result;
  }

  /** The single value of `expr` (undefined when the result is empty). */
  async scalar(expr: string): Promise<number | undefined> {
    const r = await this.query(expr);
    if (r.length > 1) throw new Error(`query ${expr}: ${r.length} series, expected one`);
    return r.length === 0 ? undefined : Number(r[0]!.value[1]);
  }

  async api<T>(p: string): Promise<T> {
    const res = await fetch(`${this.url}${p}`, { signal: AbortSignal.timeout(10_000) });
    const body = (await res.json()) as { status: string; data: T };
    if (body.status !== 'success') throw new Error(`GET ${p}: ${JSON.stringify(body)}`);
    return body.data;
  }

  async stop(): Promise<void> {
    const proc = this.proc;
    if (proc.exitCode === null && proc.signalCode === null && proc.pid !== undefined) {
      const exited = new Promise<void>((r) => proc.once('exit', () => r()));
      process.kill(proc.pid, 'SIGTERM');
      const t = setTimeout(() => proc.pid !== undefined && proc.exitCode === null && process.kill(proc.pid, 'SIGKILL'), STOP_GRACE_MS);
      await exited;
      clearTimeout(t);
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------- the load

const PUTS = 120;
const DISTINCT_KEYS = 60;
const RANGES = 80;
const TXNS = 30;
const BAD_PUTS = 4; // empty key: InvalidArgument
const FUTURE_COMPACTS = 3; // OutOfRange

const key = (i: number): Buffer => Buffer.from(`prom/load/${String(i % DISTINCT_KEYS).padStart(3, '0')}`);

async function driveLoad(c: EtcdGrpc): Promise<{ requestBytes: number }> {
  let requestBytes = 0;
  for (let i = 0; i < PUTS; i++) {
    const value = Buffer.from(`value-${i}`);
    requestBytes += key(i).length + value.length;
    await c.unary('KV', 'Put', { key: key(i), value });
  }
  for (let i = 0; i < RANGES; i++) await c.unary('KV', 'Range', { key: key(i) });
  for (let i = 0; i < TXNS; i++) {
    await c.unary('KV', 'Txn', {
      compare: [{ key: key(i), target: 'Version', result: 'Greater', version: '0' }],
      success: [{ request_put: { key: key(i), value: Buffer.from('txn') } }],
      failure: [],
    });
  }
  for (let i = 0; i < BAD_PUTS; i++) {
    await expect(c.unary('KV', 'Put', { key: Buffer.alloc(0), value: Buffer.from('x') })).rejects.toMatchObject({ code: 3 });
  }
  for (let i = 0; i < FUTURE_COMPACTS; i++) {
    await expect(c.unary('KV', 'Compact', { revision: '1000000000' })).rejects.toMatchObject({ code: 11 });
  }
  return { requestBytes };
}

type CodeTable = Map<string, number>;

async function handledByMethodAndCode(prom: PrometheusProcess): Promise<CodeTable> {
  const out: CodeTable = new Map();
  for (const s of await prom.query('sum by (grpc_method, grpc_code) (grpc_server_handled_total{job="etcd",grpc_type="unary"})')) {
    out.set(`${s.metric['grpc_method']}/${s.metric['grpc_code']}`, Number(s.value[1]));
  }
  return out;
}

// ---------------------------------------------------------------- tests

describe('a real Prometheus scraping our server', () => {
  let member: EtcdMember;
  let prom: PrometheusProcess;
  let client: EtcdGrpc;
  let watch: ReturnType<EtcdGrpc['bidi']> | undefined;
  const before = new Map<string, number>();
  let baseCodes: CodeTable;
  let requestBytes = 0;

  const BASELINE = [
    'etcd_server_proposals_committed_total',
    'etcd_server_proposals_applied_total',
    'etcd_disk_wal_fsync_duration_seconds_count',
    'etcd_mvcc_put_total',
    'etcd_mvcc_range_total',
    'etcd_debugging_mvcc_keys_total',
    'etcd_debugging_mvcc_current_revision',
    'etcd_network_client_grpc_received_bytes_total',
  ];
  const delta = async (name: string): Promise<number> => {
    const v = await prom.scalar(`${name}{job="etcd"}`);
    expect(v, name).toBeDefined();
    return v! - before.get(name)!;
  };

  beforeAll(async () => {
    requireTool(PROMETHEUS);
    const metricsPort = await freePort();
    member = await startEtcd({ args: ['--metrics=extensive', `--listen-metrics-urls=http://127.0.0.1:${metricsPort}`] });
    prom = await PrometheusProcess.start(`127.0.0.1:${metricsPort}`);
    await waitFor('the first scrape', async () => (await prom.scalar('up{job="etcd"}')) === 1, { timeoutMs: 30_000, intervalMs: 250 });
    // Wait for a scrape that happened after the helper's readiness probes, then take the baseline.
    await sleepMs(1500);
    await waitFor('a stable baseline', async () => {
      const a = await prom.scalar('sum(grpc_server_handled_total{job="etcd"})');
      await sleepMs(1200);
      return a !== undefined && a === (await prom.scalar('sum(grpc_server_handled_total{job="etcd"})'));
    }, { timeoutMs: 30_000 });
    for (const n of BASELINE) before.set(n, (await prom.scalar(`${n}{job="etcd"}`)) ?? NaN);
    baseCodes = await handledByMethodAndCode(prom);

    client = new EtcdGrpc(member.clientUrl);
    const w = client.bidi('Watch', 'Watch');
    watch = w;
    const created = new Promise<void>((resolve) => w.once('data', () => resolve()));
    w.on('error', () => undefined);
    w.write({ create_request: { key: Buffer.from('prom/load/'), range_end: Buffer.from('prom/load0') } });
    await created;
    ({ requestBytes } = await driveLoad(client));

    // The last requests sent are the failing compactions: once scraped, all the load is.
    const want = (baseCodes.get('Compact/OutOfRange') ?? 0) + FUTURE_COMPACTS;
    await waitFor('Prometheus to scrape the load', async () => (await handledByMethodAndCode(prom)).get('Compact/OutOfRange') === want, {
      timeoutMs: 30_000,
      intervalMs: 250,
    });
  }, 120_000);

  afterAll(async () => {
    watch?.cancel();
    client?.close();
    await prom?.stop();
    await member?.stop();
  });

  it('sees the member up with a leader', async () => {
    expect(await prom.scalar('up{job="etcd"}')).toBe(1);
    expect(await prom.scalar('etcd_server_has_leader{job="etcd"}')).toBe(1);
    expect(await prom.scalar('etcd_server_is_leader{job="etcd"}')).toBe(1);
    expect(await prom.scalar('etcd_server_leader_changes_seen_total{job="etcd"}')).toBeGreaterThanOrEqual(1);
    expect(await prom.scalar('sum(etcd_server_has_leader{job="etcd"})')).toBe(1);
  });

  it('counts gRPC requests by method and code exactly as sent', async () => {
    const now = await handledByMethodAndCode(prom);
    const d = (k: string): number => (now.get(k) ?? 0) - (baseCodes.get(k) ?? 0);
    expect(d('Put/OK')).toBe(PUTS);
    expect(d('Put/InvalidArgument')).toBe(BAD_PUTS);
    expect(d('Range/OK')).toBe(RANGES);
    expect(d('Txn/OK')).toBe(TXNS);
    expect(d('Compact/OutOfRange')).toBe(FUTURE_COMPACTS);
    // Every (method, code) pair of the etcd API exists, at zero when unused, as in etcd.
    expect(now.get('DeleteRange/Unavailable')).toBe(0);

    const rates = new Map(
      (await prom.query('sum by (grpc_method) (rate(grpc_server_started_total{job="etcd",grpc_type="unary"}[1m]))')).map((s) => [
        s.metric['grpc_method']!,
        Number(s.value[1]),
      ]),
    );
    for (const m of ['Put', 'Range', 'Txn']) expect(rates.get(m), m).toBeGreaterThan(0);
    expect(rates.get('LeaseGrant')).toBe(0);
    // The failure ratio the mixin alerts on counts none of these codes as failures.
    const failed = await prom.scalar(
      'sum(rate(grpc_server_handled_total{job="etcd",grpc_type="unary",grpc_code=~"Unknown|FailedPrecondition|ResourceExhausted|Internal|Unavailable|DataLoss|DeadlineExceeded"}[1m]))',
    );
    expect(failed).toBe(0);
  });

  it('reports the open watch stream and request latency (--metrics=extensive)', async () => {
    const active = await prom.scalar(
      'sum(grpc_server_started_total{job="etcd",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"}) - sum(grpc_server_handled_total{job="etcd",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"})',
    );
    expect(active).toBe(1);
    const p99 = await prom.scalar(
      'histogram_quantile(0.99, sum by (le) (rate(grpc_server_handling_seconds_bucket{job="etcd",grpc_method="Put",grpc_type="unary"}[1m])))',
    );
    expect(p99).toBeGreaterThan(0);
    expect(p99).toBeLessThanOrEqual(10);
    const bytesIn = await delta('etcd_network_client_grpc_received_bytes_total');
    expect(bytesIn).toBeGreaterThanOrEqual(requestBytes);
    expect(await prom.scalar('rate(etcd_network_client_grpc_sent_bytes_total{job="etcd"}[1m])')).toBeGreaterThan(0);
  });

  it('shows proposals committed and applied for every write', async () => {
    const writes = PUTS + TXNS;
    const committed = await delta('etcd_server_proposals_committed_total');
    const applied = await delta('etcd_server_proposals_applied_total');
    expect(committed).toBeGreaterThanOrEqual(writes);
    // Empty-key puts never reach raft; a few internal entries (compactions) may.
    expect(committed).toBeLessThanOrEqual(writes + FUTURE_COMPACTS + 10);
    expect(applied).toBe(committed);
    expect(await prom.scalar('etcd_server_proposals_pending{job="etcd"}')).toBe(0);
    expect(await prom.scalar('rate(etcd_server_proposals_committed_total{job="etcd"}[1m])')).toBeGreaterThan(0);
    expect(await prom.scalar('rate(etcd_server_proposals_applied_total{job="etcd"}[1m])')).toBeGreaterThan(0);
    expect(await delta('etcd_debugging_mvcc_current_revision')).toBe(writes);
  });

  it('has WAL fsync and backend commit histograms with a plausible p99', async () => {
    const fsyncs = await delta('etcd_disk_wal_fsync_duration_seconds_count');
    expect(fsyncs).toBeGreaterThanOrEqual(1);
    // At most one durable WAL write per proposal (batched ones share it) plus a few of raft's own.
    expect(fsyncs).toBeLessThanOrEqual(PUTS + TXNS + FUTURE_COMPACTS + 10);
    for (const h of ['etcd_disk_wal_fsync_duration_seconds', 'etcd_disk_backend_commit_duration_seconds']) {
      const p99 = await prom.scalar(`histogram_quantile(0.99, sum by (le) (rate(${h}_bucket{job="etcd"}[1m])))`);
      expect(p99, h).toBeGreaterThan(0);
      // The top finite bucket of etcd's disk histograms.
      expect(p99, h).toBeLessThanOrEqual(8.192);
    }
  });

  it('reports the database size, keys and MVCC operations', async () => {
    const total = await prom.scalar('etcd_mvcc_db_total_size_in_bytes{job="etcd"}');
    const inUse = await prom.scalar('etcd_mvcc_db_total_size_in_use_in_bytes{job="etcd"}');
    expect(total).toBeGreaterThan(0);
    expect(inUse).toBeGreaterThan(0);
    expect(inUse!).toBeLessThanOrEqual(total!);
    expect(await prom.scalar('etcd_server_quota_backend_bytes{job="etcd"}')).toBeGreaterThan(total!);
    expect(await delta('etcd_debugging_mvcc_keys_total')).toBe(DISTINCT_KEYS);
    expect(await delta('etcd_mvcc_put_total')).toBe(PUTS + TXNS);
    expect(await delta('etcd_mvcc_range_total')).toBeGreaterThanOrEqual(RANGES);
  });

  it('loads the shipped alerting rules, evaluates them cleanly, and fires none of the alarms', async () => {
    type Rule = { name: string; health: string; lastError?: string; state?: string };
    type Group = { name: string; rules: Rule[]; lastEvaluation: string };
    const groups = await waitFor(
      'a rule evaluation',
      async () => {
        const d = await prom.api<{ groups: Group[] }>('/api/v1/rules');
        const g = d.groups.find((x) => x.name === 'etcd');
        return g !== undefined && !g.lastEvaluation.startsWith('0001') && g.rules.every((r) => r.health !== 'unknown') ? d.groups : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 250 },
    );
    const rules = groups.find((g) => g.name === 'etcd')!.rules;
    expect(rules.length).toBe(14);
    for (const r of rules) expect([r.name, r.health, r.lastError ?? '']).toEqual([r.name, 'ok', '']);
    const alerts = await prom.api<{ alerts: Array<{ labels: Record<string, string>; state: string }> }>('/api/v1/alerts');
    const active = alerts.alerts.map((a) => a.labels['alertname']);
    for (const n of ['etcdNoLeader', 'etcdHighNumberOfFailedGRPCRequests', 'etcdMembersDown', 'etcdBackendQuotaLowSpace', 'etcdHighFsyncDurations']) {
      expect(active).not.toContain(n);
    }
  });
});

describe('promtool', () => {
  beforeAll(() => requireTool(PROMTOOL));

  /** promtool's remarks as "name: remark" lines, sorted. */
  function lint(exposition: string): string[] {
    const r = promtool(['check', 'metrics'], exposition);
    return r.out
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '')
      .sort();
  }

  it("finds nothing in our /metrics beyond the naming remarks it makes on etcd's own", async () => {
    const ours = await startEtcd({ args: ['--metrics=extensive'] });
    let real: EtcdMember | undefined;
    try {
      real = await startEtcd({ bin: REAL_ETCD, args: ['--metrics=extensive'] });
      // Some traffic, so labelled series (gRPC, client bytes) exist on both sides.
      for (const m of [ours, real]) {
        const c = new EtcdGrpc(m.clientUrl);
        try {
          await c.unary('KV', 'Put', { key: Buffer.from('lint'), value: Buffer.from('v') } as Msg);
          await c.unary('KV', 'Range', { key: Buffer.from('lint') } as Msg);
        } finally {
          c.close();
        }
      }
      const ourText = await getText(`${ours.clientUrl}/metrics`);
      const etcdText = await getText(`${real.clientUrl}/metrics`);
      const ourRemarks = lint(ourText);
      const etcdRemarks = new Set(lint(etcdText));
      // The comparison means something only if promtool did look at both.
      expect(ourText).toMatch(/^etcd_server_has_leader 1$/m);
      expect(etcdRemarks.size).toBeGreaterThan(0);
      expect(ourRemarks.filter((r) => !etcdRemarks.has(r))).toEqual([]);
      // Every remark is about a name etcd chose: a _total gauge, a counter without _total, milliseconds.
      const etcdNaming = /^etcd_\S+ (non-counter metrics should not have "_total" suffix|counter metrics should have "_total" suffix|use base unit "seconds" instead of "milliseconds")$/;
      for (const r of ourRemarks) expect(r).toMatch(etcdNaming);
    } finally {
      await real?.stop();
      await ours.stop();
    }
  }, 90_000);

  it('accepts the shipped configuration and alerting rules', () => {
    const rules = promtool(['check', 'rules', 'alerts.yml']);
    expect(rules.out).toMatch(/SUCCESS: 14 rules found/);
    expect(rules.status).toBe(0);
    const config = promtool(['check', 'config', 'prometheus.yml']);
    expect(config.out).toMatch(/SUCCESS/);
    expect(config.status).toBe(0);
  });

  it('passes the alerting rules unit tests (deploy/prometheus/alerts_test.yml)', () => {
    const r = promtool(['test', 'rules', 'alerts_test.yml']);
    expect(r.out).toMatch(/SUCCESS/);
    expect(r.status).toBe(0);
  });
});
