// Puts the keys a read case needs before the load starts (through the etcd3 npm client).
import assert from 'node:assert';
import { Etcd3 } from 'etcd3';

/** Puts in flight at once while seeding: enough to hide latency, small enough not to flood a cluster. */
const SEED_CONCURRENCY = 32;
const SEED_CALL_TIMEOUT_MS = 10_000;

export interface SeedKey {
  key: string;
  valueBytes: number;
}

/** Writes `keys` with values of the given size, bounded in flight; rejects after `timeoutMs` total. */
export async function seedKeys(endpoint: string, keys: readonly SeedKey[], timeoutMs: number): Promise<void> {
  const client = new Etcd3({
    hosts: `http://${endpoint}`,
    defaultCallOptions: () => ({ deadline: Date.now() + SEED_CALL_TIMEOUT_MS }),
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    const work = (async () => {
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < keys.length) {
          const k = keys[next++];
          assert(k.valueBytes >= 0);
          await client.put(k.key).value(Buffer.alloc(k.valueBytes, 0x61));
        }
      };
      await Promise.all(Array.from({ length: Math.min(SEED_CONCURRENCY, keys.length) }, worker));
    })();
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`seeding ${keys.length} keys took over ${timeoutMs} ms`)), timeoutMs);
    });
    await Promise.race([work, timeout]);
  } finally {
    if (timer) clearTimeout(timer);
    client.close();
  }
}

/** `count` keys of exactly `keyBytes` bytes under a prefix, in order ("r/000000", "r/000001", ...). */
export function numberedKeys(prefix: string, count: number, keyBytes: number): string[] {
  const digits = keyBytes - prefix.length;
  assert(digits >= String(count - 1).length, 'key too short for the count');
  return Array.from({ length: count }, (_, i) => prefix + String(i).padStart(digits, '0'));
}
