import { describe, expect, it } from 'vitest';
import { median, ratio, summarize, renderCaseTable, renderSummaryTable, type Sample } from '../../../scripts/bench/table';
import { parseToolOutput } from '../../../scripts/bench/parse';
import { selectCases, battery, QUICK } from '../../../scripts/bench/cases';

function sample(qps: number, p99Ms: number, extra: Partial<Sample> = {}): Sample {
  return { ok: true, qps, p50Ms: p99Ms / 4, p99Ms, errors: 0, requests: qps * 2, peakRssMiB: 30, cpuSec: 1, wallSec: 2, ...extra };
}

describe('median and ratio', () => {
  it('takes the middle value, or the mean of the two middle values', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(() => median([])).toThrow();
  });

  it('is ours over etcd, and n/a without a usable etcd figure', () => {
    expect(ratio(50, 100)).toBe(0.5);
    expect(ratio(50, 0)).toBeNull();
    expect(ratio(undefined, 100)).toBeNull();
  });
});

describe('summarize', () => {
  it('reports medians over successful runs only and counts the failures', () => {
    const s = summarize([sample(100, 4), sample(300, 2), { ...sample(0, 0), ok: false, error: 'timeout' }, sample(200, 8)]);
    expect(s).not.toBeNull();
    expect(s?.qps).toBe(200);
    expect(s?.p99Ms).toBe(4);
    expect(s?.failed).toBe(1);
    expect(s?.lastError).toBe('timeout');
    // 1 s of CPU over 400 requests
    expect(s?.cpuUsPerOp).toBe(2500);
  });

  it('is null when every run failed', () => {
    expect(summarize([{ ...sample(0, 0), ok: false, error: 'x' }])).toBeNull();
  });
});

describe('tables', () => {
  it('shows both systems and the ratio ours/etcd per metric', () => {
    const md = renderCaseTable({ name: 'put-1c', title: 'put', unit: 'requests', etcd: [sample(1000, 2)], ours: [sample(500, 4)] });
    expect(md).toContain('| requests/s | 1000 | 500 | 0.50x |');
    expect(md).toContain('| p99 ms | 2.00 | 4.00 | 2.00x |');
  });

  it('marks ours n/a when it was not run, and says why a side failed', () => {
    const na = renderSummaryTable([{ name: 'put-1c-3m', title: 't', unit: 'requests', etcd: [sample(400, 5)], ours: [], oursNote: 'n/a' }]);
    expect(na).toContain('| put-1c-3m | 400 | n/a | n/a |');
    const failedRun = renderCaseTable({ name: 'x', title: 't', unit: 'requests', etcd: [sample(400, 5)], ours: [{ ...sample(0, 0), ok: false, error: 'timeout: no result' }] });
    expect(failedRun).toContain('| requests/s | 400 | failed | n/a |');
    expect(failedRun).toContain('- ours: timeout: no result');
  });
});

const TOOL_OUTPUT = ` 2000 / 2000  100.00% 2s\r
Summary:
  Total:\t2.7041 secs.
  Slowest:\t0.0321 secs.
  Fastest:\t0.0005 secs.
  Average:\t0.0013 secs.
  Stddev:\t0.0016 secs.
  Requests/sec:\t739.6255

Response time histogram:
  0.0005 [1]\t|
  0.0036 [1995]\t|∎∎∎∎
  0.0321 [1]\t|

Latency distribution:
  10% in 0.0007 secs.
  50% in 0.0010 secs.
  99% in 0.0093 secs.
  99.9% in 0.0219 secs.

Error distribution:
  [3]\trpc error: code = Unavailable
`;

describe('parseToolOutput', () => {
  it("reads requests/s, p50, p99, successes and errors from the tool's summary", () => {
    const s = parseToolOutput(TOOL_OUTPUT);
    expect(s).toEqual({ totalSec: 2.7041, qps: 739.6255, p50Ms: 1, p99Ms: expect.closeTo(9.3, 6), requests: 1997, errors: 3 });
  });

  it('picks a named block when the tool prints several (watch)', () => {
    const two = `Watch creation summary:\n${TOOL_OUTPUT.replace('739.6255', '11')}Watch events received summary:\n${TOOL_OUTPUT}`;
    expect(parseToolOutput(two, 'Watch creation summary:')?.qps).toBe(11);
    expect(parseToolOutput(two, 'Watch events received summary:')?.qps).toBe(739.6255);
  });

  it('returns null without a summary (a killed or failed run)', () => {
    expect(parseToolOutput(' 12 / 2000 0.6%')).toBeNull();
  });
});

describe('selectCases', () => {
  it('selects by name with * wildcards', () => {
    const names = selectCases(battery(QUICK), 'put-*c,watch-latency').map((c) => c.name);
    expect(names).toEqual(['put-1c', 'put-100c', 'put-1000c', 'put-4k-100c', 'watch-latency']);
  });
});
