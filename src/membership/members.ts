// The cluster's member list, changed only by applied Raft entries (conf changes and
// attribute updates), persisted in the backend so a restart knows it without replay.
import assert from 'node:assert';
import type { Database } from 'lmdb';

export interface Member {
  id: bigint;
  name: string;
  peerUrls: string[];
  clientUrls: string[];
  isLearner: boolean;
}

interface MemberJson {
  id: string;
  name: string;
  peerUrls: string[];
  clientUrls: string[];
  isLearner: boolean;
}

/** What a ConfChange entry's context carries (etcd puts the member there too). */
export interface MemberContext {
  id: string;
  name: string;
  peerUrls: string[];
  isLearner: boolean;
}

const MAX_MEMBERS = 64;

function keyOf(id: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(id);
  return b;
}

export class Members {
  private readonly members = new Map<bigint, Member>();
  private readonly removed = new Set<bigint>();

  constructor(
    private readonly db: Database<Buffer, Buffer>,
    private readonly removedDb: Database<Buffer, Buffer>,
  ) {
    this.reload();
  }

  /** (Re)read the member list from the backend, e.g. after a snapshot replaced it. */
  reload(): void {
    this.members.clear();
    this.removed.clear();
    for (const { value } of this.db.getRange({})) {
      const m = JSON.parse(value.toString()) as MemberJson;
      const member: Member = { ...m, id: BigInt(m.id) };
      this.members.set(member.id, member);
    }
    for (const { key } of this.removedDb.getRange({})) this.removed.add(key.readBigUInt64BE(0));
  }

  list(): Member[] {
    return [...this.members.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  get(id: bigint): Member | undefined {
    return this.members.get(id);
  }

  isRemoved(id: bigint): boolean {
    return this.removed.has(id);
  }

  /** IDs of the members removed from the cluster (they may never join again). */
  removedIds(): bigint[] {
    return [...this.removed];
  }

  /** Only inside the applier's backend batch. */
  add(m: Member): void {
    assert(!this.removed.has(m.id), `member ${m.id.toString(16)} was removed before`);
    assert(this.members.size < MAX_MEMBERS || this.members.has(m.id), 'too many members');
    this.members.set(m.id, m);
    this.persist(m);
  }

  /** Forgets every member, removed ones too (a snapshot restored into a new cluster). Only inside a backend batch. */
  clear(): void {
    // Keys first: no removal under an open cursor.
    for (const key of [...this.db.getKeys({})]) this.db.removeSync(key);
    for (const key of [...this.removedDb.getKeys({})]) this.removedDb.removeSync(key);
    this.members.clear();
    this.removed.clear();
  }

  remove(id: bigint): void {
    this.members.delete(id);
    this.removed.add(id);
    this.db.removeSync(keyOf(id));
    this.removedDb.putSync(keyOf(id), Buffer.from([1]));
  }

  update(id: bigint, patch: Partial<Omit<Member, 'id'>>): void {
    const m = this.members.get(id);
    if (!m) return;
    const next = { ...m, ...patch };
    this.members.set(id, next);
    this.persist(next);
  }

  private persist(m: Member): void {
    const j: MemberJson = { ...m, id: m.id.toString() };
    this.db.putSync(keyOf(m.id), Buffer.from(JSON.stringify(j)));
  }
}
