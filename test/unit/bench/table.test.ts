import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fsyncFloorLines, median, ratio, summarize, renderCaseTable, renderSummaryTable, type Sample } from '../../../scripts/bench/table';
import { measureFsyncFloor } from '../../../scripts/bench/fsync_floor';
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

describe('fdatasync floor', () => {
  it('times appends each followed by fdatasync, and leaves no file behind', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fsync-floor-'));
    try {
      const f = measureFsyncFloor(dir, 40, 350);
      expect(f.writes).toBe(40);
      expect(f.p50Us).toBeGreaterThan(0);
      expect(f.p99Us).toBeGreaterThanOrEqual(f.p50Us);
      expect(fs.readdirSync(dir)).toEqual([]);
      expect(() => measureFsyncFloor(dir, 0)).toThrow();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("holds each repeat's one-client put p50 to that repeat's floor, against the 2x target", () => {
    const floors = [
      { writes: 2000, recordBytes: 350, p50Us: 200, p99Us: 400 },
      { writes: 2000, recordBytes: 350, p50Us: 250, p99Us: 500 },
      null,
    ];
    // p50 is p99 / 4 in sample(): ours 0.45 and 0.6 ms over floors of 200 and 250 µs; the third repeat has no floor.
    const put = { name: 'put-1c', title: 'put', unit: 'requests', etcd: [sample(900, 3.2), sample(900, 4), sample(900, 4)], ours: [sample(1000, 1.8), sample(1000, 2.4), sample(1000, 1)] };
    const lines = fsyncFloorLines([put], floors);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toContain('p50 200, 250, failed µs');
    expect(lines[1]).toContain('etcd 4.00x (4.00-4.00)');
    expect(lines[1]).toContain('ours **2.33x (2.25-2.40)**');
    expect(lines[1]).toContain('NOT met');
    const fast = { ...put, ours: [sample(1000, 1.2), sample(1000, 1.6)] };
    expect(fsyncFloorLines([fast], floors)[1]).toContain('ours **1.55x (1.50-1.60)** (target for ours <= 2x: met)');
    expect(fsyncFloorLines([put], [])).toEqual([]);
  });

  it("adds the null server's put p50 over the same repeats' floors when it ran", () => {
    const floors = [
      { writes: 2000, recordBytes: 350, p50Us: 200, p99Us: 400 },
      { writes: 2000, recordBytes: 350, p50Us: 250, p99Us: 500 },
      { writes: 2000, recordBytes: 350, p50Us: 100, p99Us: 300 },
    ];
    const put = { name: 'put-1c', title: 'put', unit: 'requests', etcd: [sample(900, 3.2)], ours: [sample(1000, 1.8)] };
    // 0.5 ms over 200 µs, a failed run, 0.3 ms over 100 µs.
    const lines = fsyncFloorLines([put], floors, [0.5, null, 0.3]);
    expect(lines).toHaveLength(3);
    expect(lines[2]).toContain('only appends each put to a file and fdatasyncs it');
    expect(lines[2]).toContain('2.75x (2.50-3.00)');
    // Ours 0.45 ms (sample(1000, 1.8)) in the one repeat that has both, over the null server's 0.5 ms.
    expect(lines[2]).toContain("ours' p50 over that server's in the same repeat: 0.90x (0.90-0.90)");
    expect(fsyncFloorLines([put], floors, [null, null])).toHaveLength(2);
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
