// deploy/: the Grafana dashboard and the alerting rules only use series we expose.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../../src/metrics';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const DASHBOARD = path.join(ROOT, 'deploy', 'grafana', 'etcd-dashboard.json');
const ALERTS = path.join(ROOT, 'deploy', 'prometheus', 'alerts.yml');

// Series Prometheus makes itself, not the target.
const PROMETHEUS_OWN = new Set(['up']);

async function exposedNames(): Promise<Set<string>> {
  const m = createMetrics({ serverVersion: '3.6.0', extensive: true });
  const names = new Set<string>();
  for (const metric of await m.registry.getMetricsAsJSON()) {
    names.add(metric.name);
    if (String(metric.type) === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(metric.name + s);
    if (String(metric.type) === 'summary') for (const s of ['_sum', '_count']) names.add(metric.name + s);
  }
  return names;
}

/** Metric names in a PromQL expression (label names in by/without lists and strings dropped). */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"[^"]*"/g, '""')
    .replace(/\{[^}]*\}/g, '{}')
    .replace(/\b(?:by|without)\s*\([^)]*\)/g, ' ');
  const out = new Set<string>();
  for (const m of bare.matchAll(/\b((?:etcd|grpc|process|nodejs|os)_[a-z0-9_]+|up)\b/g)) out.add(m[1]!);
  return [...out];
}

interface Panel {
  id: number;
  type: string;
  title: string;
  targets?: Array<{ expr: string; refId: string }>;
}

describe('deploy/grafana/etcd-dashboard.json', () => {
  const dash = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[]; uid: string; title: string };

  it('is a dashboard with unique panel ids and queries in every graph', () => {
    expect(dash.uid).toBeTruthy();
    const ids = dash.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of dash.panels.filter((x) => x.type !== 'row')) {
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets!) expect(t.expr, p.title).toMatch(/\S/);
    }
  });

  it('references only metric names we expose', async () => {
    const names = await exposedNames();
    const used = new Set<string>();
    for (const p of dash.panels) for (const t of p.targets ?? []) for (const n of metricNames(t.expr)) used.add(n);
    // The panels a dashboard needs: leader, proposals, fsync, db size, gRPC by method and code.
    for (const n of [
      'etcd_server_has_leader',
      'etcd_server_proposals_committed_total',
      'etcd_disk_wal_fsync_duration_seconds_bucket',
      'etcd_mvcc_db_total_size_in_bytes',
      'grpc_server_handled_total',
      'grpc_server_started_total',
    ]) {
      expect(used).toContain(n);
    }
    const missing = [...used].filter((n) => !names.has(n) && !PROMETHEUS_OWN.has(n));
    expect(missing).toEqual([]);
  });
});

describe('deploy/prometheus/alerts.yml', () => {
  it('references only metric names we expose', async () => {
    const names = await exposedNames();
    const text = fs.readFileSync(ALERTS, 'utf8');
    const exprs = [...text.matchAll(/expr: \|\n((?: {10}.*\n)+)/g)].map((m) => m[1]!);
    expect(exprs.length).toBeGreaterThanOrEqual(10);
    const used = new Set(exprs.flatMap(metricNames));
    const missing = [...used].filter((n) => !names.has(n) && !PROMETHEUS_OWN.has(n));
    expect(missing).toEqual([]);
    for (const n of ['etcd_server_has_leader', 'etcd_server_leader_changes_seen_total', 'etcd_disk_wal_fsync_duration_seconds_bucket']) {
      expect(used).toContain(n);
    }
  });
});
