// CPU time and resident size of a server process, from /proc (Linux only).
import fs from 'node:fs';

/** USER_HZ: the unit of utime/stime in /proc/<pid>/stat; 100 on every Linux we run on. */
const CLOCK_TICKS_PER_SEC = 100;

export interface ProcSnapshot {
  cpuSec: number;
  rssMiB: number;
  /** RssAnon: the resident part that is not file-backed (heap, stacks; not the mmapped database). */
  anonRssMiB: number;
  /** VmHWM: the peak resident size since the process started. */
  peakRssMiB: number;
}

/** null once the process has exited (its /proc entry is gone). */
export function readProc(pid: number): ProcSnapshot | null {
  let stat: string;
  let status: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return null;
  }
  // The command name (field 2) may hold spaces and parentheses: fields count from the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utimeTicks = Number(fields[11]);
  const stimeTicks = Number(fields[12]);
  const kib = (name: string): number => {
    const m = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status);
    return m ? Number(m[1]) : 0;
  };
  return {
    cpuSec: (utimeTicks + stimeTicks) / CLOCK_TICKS_PER_SEC,
    rssMiB: kib('VmRSS') / 1024,
    anonRssMiB: kib('RssAnon') / 1024,
    peakRssMiB: kib('VmHWM') / 1024,
  };
}

/** Summed over the members of a cluster; missing processes count as zero. */
export function readProcs(pids: readonly number[]): ProcSnapshot {
  const total: ProcSnapshot = { cpuSec: 0, rssMiB: 0, anonRssMiB: 0, peakRssMiB: 0 };
  for (const pid of pids) {
    const s = readProc(pid);
    if (!s) continue;
    total.cpuSec += s.cpuSec;
    total.rssMiB += s.rssMiB;
    total.anonRssMiB += s.anonRssMiB;
    total.peakRssMiB += s.peakRssMiB;
  }
  return total;
}
