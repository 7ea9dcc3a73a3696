// Reading a member's /metrics in the Prometheus text format, as a scrape sees it.

/** The body of GET <clientUrl>/metrics; throws unless the answer is 200. */
export async function scrapeMetrics(clientUrl: string): Promise<string> {
  const r = await fetch(`${clientUrl}/metrics`, { signal: AbortSignal.timeout(5_000) });
  if (r.status !== 200) throw new Error(`GET ${clientUrl}/metrics: ${r.status}`);
  return r.text();
}

/**
 * The value of the first sample of `name` carrying every label given (in any order), or of the
 * unlabelled sample when none are given; undefined when there is none.
 */
export function sampleValue(text: string, name: string, labels: Readonly<Record<string, string>> = {}): number | undefined {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (pairs.length === 0 ? !line.startsWith(name + ' ') : !line.startsWith(name + '{') || !pairs.every((p) => line.includes(p))) continue;
    return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}
