// Raised alarms (NOSPACE, CORRUPT) per member, changed only through applied entries and
// persisted in the backend: an alarm survives restarts until an operator disarms it.
import type { Database } from 'lmdb';

export const AlarmType = { NONE: 0, NOSPACE: 1, CORRUPT: 2 } as const;
export type AlarmTypeValue = (typeof AlarmType)[keyof typeof AlarmType];

export interface Alarm {
  memberId: bigint;
  alarm: number;
}

function keyOf(a: Alarm): Buffer {
  const b = Buffer.alloc(9);
  b.writeBigUInt64BE(a.memberId, 0);
  b.writeUInt8(a.alarm, 8);
  return b;
}

export class Alarms {
  private readonly active = new Map<string, Alarm>();

  constructor(private readonly db: Database<Buffer, Buffer>) {
    this.reload();
  }

  /** (Re)read raised alarms from the backend, e.g. after a snapshot replaced it. */
  reload(): void {
    this.active.clear();
    for (const { key } of this.db.getRange({})) {
      const a = { memberId: key.readBigUInt64BE(0), alarm: key.readUInt8(8) };
      this.active.set(keyOf(a).toString('hex'), a);
    }
  }

  list(): Alarm[] {
    return [...this.active.values()];
  }

  has(alarm: number): boolean {
    for (const a of this.active.values()) if (a.alarm === alarm) return true;
    return false;
  }

  /** Only inside the applier's backend batch. Returns false when it was already active. */
  activate(a: Alarm): boolean {
    const k = keyOf(a);
    if (this.active.has(k.toString('hex'))) return false;
    this.active.set(k.toString('hex'), a);
    this.db.putSync(k, Buffer.from([1]));
    return true;
  }

  /** Only inside the applier's backend batch. Returns false when it was not active. */
  deactivate(a: Alarm): boolean {
    const k = keyOf(a);
    if (!this.active.delete(k.toString('hex'))) return false;
    this.db.removeSync(k);
    return true;
  }
}
