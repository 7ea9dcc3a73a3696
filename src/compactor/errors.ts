import { Errors, isEtcdError } from '../errors';

const COMPACTED_SUFFIX = 'mvcc: required revision has been compacted';

/**
 * etcd's compactors treat ErrCompacted as success: the window already moved past the revision
 * (another compaction, or the same revision sampled twice on an idle cluster).
 */
export function isCompactedError(e: unknown): boolean {
  if (isEtcdError(e)) return e.message === Errors.Compacted.message;
  return e instanceof Error && e.message.endsWith(COMPACTED_SUFFIX);
}
