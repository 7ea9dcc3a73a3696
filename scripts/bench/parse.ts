// Reads the summary that etcd's `benchmark` tool prints (pkg/report): requests/s, percentiles, errors.

export interface ToolSummary {
  totalSec: number;
  qps: number;
  p50Ms: number;
  p99Ms: number;
  /** Successful results the report counted (its histogram total). */
  requests: number;
  errors: number;
}

/**
 * The tool prints one "Summary:" block per phase; `watch` prints two (watch creation, then events
 * received). `section` picks the first block after that heading; default: the last block.
 */
export function parseToolOutput(text: string, section?: string): ToolSummary | null {
  // Progress bars use carriage returns; the summary itself is plain lines.
  let clean = text.replace(/\r/g, '\n');
  if (section !== undefined) {
    const at = clean.lastIndexOf(section);
    if (at < 0) return null;
    clean = clean.slice(at + section.length);
  }
  const blocks = clean.split(/^\s*Summary:\s*$/m);
  if (blocks.length < 2) return null;
  // Without a heading: the last block; after a heading: the first block that follows it.
  const index = section === undefined ? blocks.length - 1 : 1;
  const block = blocks[index];
  const num = (re: RegExp): number | null => {
    const m = re.exec(block);
    return m ? Number(m[1]) : null;
  };
  const totalSec = num(/^\s*Total:\s*([0-9.eE+-]+)\s*secs/m);
  const qps = num(/^\s*Requests\/sec:\s*([0-9.eE+-]+)/m);
  if (totalSec === null || qps === null) return null;
  const p50 = num(/^\s*50(?:\.0+)?% in ([0-9.eE+-]+) secs/m);
  const p99 = num(/^\s*99(?:\.0+)?% in ([0-9.eE+-]+) secs/m);
  let requests = 0;
  const hist = /Response time histogram:\n([\s\S]*?)(?:\n\s*\n|$)/.exec(block);
  if (hist) {
    for (const m of hist[1].matchAll(/\[(\d+)\]/g)) requests += Number(m[1]);
  }
  let errors = 0;
  const errs = /Error distribution:\n([\s\S]*?)(?:\n\s*\n|$)/.exec(block);
  if (errs) {
    for (const m of errs[1].matchAll(/^\s*\[(\d+)\]/gm)) errors += Number(m[1]);
  }
  if (requests === 0 && qps > 0) requests = Math.round(qps * totalSec);
  return {
    totalSec,
    qps,
    p50Ms: p50 === null ? NaN : p50 * 1000,
    p99Ms: p99 === null ? NaN : p99 * 1000,
    requests,
    errors,
  };
}
