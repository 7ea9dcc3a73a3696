// Worker thread entry for writeEtcdSnapshotOffThread(): converts one LMDB copy to etcd's bbolt format
// and tells the parent how it went. Off the event loop: the conversion's CPU (1.4-1.8 s at 1M keys)
// and closing the copy's LMDB environment (~0.2 s of unmapping it once read) held every request.
import { parentPort, workerData } from 'node:worker_threads';
import { writeEtcdSnapshot } from './etcd_snapshot';

interface Job {
  lmdbCopy: string;
  out: string;
}

const port = parentPort;
if (port === null) throw new Error('etcd_snapshot_worker runs as a worker thread');
const job = workerData as Job;
writeEtcdSnapshot(job.lmdbCopy, job.out).then(
  () => port.postMessage({ ok: true }),
  (e: unknown) => port.postMessage({ ok: false, error: e instanceof Error ? (e.stack ?? e.message) : String(e) }),
);
