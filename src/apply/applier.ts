// The one apply path: every committed InternalRaftRequest runs here, on every member, in log
// order, inside the backend batch that also records the applied index. The result goes back
// to the waiting client (if it is on this member) through the server.
import type { Backend } from '../backend/backend';
import { EtcdError, etcdError } from '../errors';
import type { Lessor } from '../lease/lessor';
import type { Logger } from '../log';
import type { MvccStore } from '../mvcc/store';
import type * as pb from '../pb/types';
import { AlarmType, type Alarms } from '../alarm/alarms';
import type { Members } from '../membership/members';
import { applyCompaction, applyDeleteRange, applyPut, applyTxn, type LeaseAttacher } from './kv';
import type { AuthStore, AuthInfo } from '../auth/store';
import type { TokenProvider } from '../auth/tokens';
import { applyAuthRequest, needsAdmin } from '../auth/apply';

export interface ApplyResult {
  resp: unknown;
  err: EtcdError | null;
  /** Resolves when slow work started by the entry is finished (physical compaction). */
  done?: Promise<void>;
}

export interface ApplierDeps {
  backend: Backend;
  mvcc: MvccStore;
  lessor: Lessor;
  alarms: Alarms;
  members: Members;
  log: Logger;
  /** Absent in tools and tests that need no auth: then nothing is checked. */
  auth?: { store: AuthStore; tokens: TokenProvider };
}

/** Whether a txn only reads (then it may run while NOSPACE is raised). */
function txnIsReadOnly(t: pb.TxnRequest): boolean {
  const ops = [...(t.success ?? []), ...(t.failure ?? [])];
  return ops.every((op) => {
    if (op.requestRange) return true;
    if (op.requestTxn) return txnIsReadOnly(op.requestTxn);
    return false;
  });
}

export class Applier {
  constructor(private readonly d: ApplierDeps) {}

  private leases(): LeaseAttacher {
    return this.d.lessor;
  }

  /** Apply one decoded request. Never throws for bad input: errors go into the result. */
  apply(req: pb.InternalRaftRequest, index = 0): ApplyResult {
    try {
      // Compaction is the one request whose answer may wait for slow work (physical=true).
      if (req.compaction) {
        this.checkAuth(req);
        const { resp, done } = applyCompaction(this.d.mvcc, req.compaction);
        if (req.compaction.physical) return { resp, err: null, done };
        done.catch(() => undefined);
        return { resp, err: null };
      }
      return { resp: this.dispatch(req, index), err: null };
    } catch (e) {
      if (e instanceof EtcdError) return { resp: null, err: e };
      throw e;
    }
  }

  private checkCapacity(isWrite: boolean): void {
    if (!isWrite) return;
    if (this.d.alarms.has(AlarmType.CORRUPT)) throw etcdError('Corrupt');
    if (this.d.alarms.has(AlarmType.NOSPACE)) throw etcdError('NoSpace');
  }

  /** etcd's authApplierV3: who the proposer was, checked against the store as it is now. */
  private checkAuth(req: pb.InternalRaftRequest): void {
    const auth = this.d.auth;
    if (!auth || !auth.store.isEnabled()) return;
    const st = auth.store;
    const h = req.header;
    const ai: AuthInfo | null = h ? { username: h.username, revision: Number(h.authRevision) } : null;
    if (needsAdmin(req)) st.checkAdmin(ai);
    if (req.put) {
      st.checkPut(ai, req.put.key);
      this.checkLeasePuts(ai, req.put.lease);
      if (req.put.prevKv) st.checkRange(ai, req.put.key, Buffer.alloc(0));
    } else if (req.deleteRange) {
      st.checkDeleteRange(ai, req.deleteRange.key, req.deleteRange.rangeEnd);
      if (req.deleteRange.prevKv) st.checkRange(ai, req.deleteRange.key, req.deleteRange.rangeEnd);
    } else if (req.txn) {
      st.checkTxn(ai, req.txn, (a, lease) => this.checkLeasePuts(a, lease));
    } else if (req.leaseRevoke) {
      this.checkLeasePuts(ai, req.leaseRevoke.ID);
    } else if (req.authUserGet) {
      try {
        st.checkAdmin(ai);
      } catch (e) {
        if (req.authUserGet.name !== ai?.username) throw e;
      }
    } else if (req.authRoleGet) {
      try {
        st.checkAdmin(ai);
      } catch (e) {
        if (!ai || !st.hasRole(ai.username, req.authRoleGet.role)) throw e;
      }
    }
  }

  /**
   * etcd's checkLeasePuts: a lease's keys must all be writable by whoever attaches to or revokes
   * it (the root role may, without looking; a lease without keys or none: nothing to check).
   */
  private checkLeasePuts(ai: AuthInfo | null, leaseId: string): void {
    if (!this.d.auth || leaseId === '0' || leaseId === '') return;
    if (this.d.auth.store.isAdmin(ai)) return;
    const ttl = this.d.lessor.timeToLive(BigInt(leaseId));
    for (const key of ttl?.keys ?? []) this.d.auth.store.checkPut(ai, key);
  }

  /** Put, DeleteRange and Txn; undefined when the entry is none of them. */
  private dispatchKv(req: pb.InternalRaftRequest): unknown {
    const { mvcc } = this.d;
    if (req.put) {
      this.checkCapacity(true);
      const txn = mvcc.write();
      try {
        return applyPut(txn, this.leases(), req.put);
      } finally {
        txn.end();
      }
    }
    if (req.deleteRange) {
      if (this.d.alarms.has(AlarmType.CORRUPT)) throw etcdError('Corrupt');
      const txn = mvcc.write();
      try {
        return applyDeleteRange(txn, this.leases(), req.deleteRange);
      } finally {
        txn.end();
      }
    }
    if (req.txn) {
      this.checkCapacity(!txnIsReadOnly(req.txn));
      return applyTxn(mvcc, this.leases(), req.txn);
    }
    return undefined;
  }

  private dispatch(req: pb.InternalRaftRequest, index: number): unknown {
    const { mvcc } = this.d;
    this.checkAuth(req);
    // KV requests first: nearly every entry is one, and an entry carries a single request.
    const kv = this.dispatchKv(req);
    if (kv !== undefined) return kv;
    if (this.d.auth) {
      const r = applyAuthRequest(this.d.auth.store, this.d.auth.tokens, req, index);
      if (r !== undefined) return r;
    }
    if (req.leaseGrant) {
      this.checkCapacity(true);
      const id = BigInt(req.leaseGrant.ID);
      const granted = this.d.lessor.grant(id, Number(req.leaseGrant.TTL));
      return { header: null, ID: granted.id.toString(), TTL: String(granted.ttlSec), error: '' };
    }
    if (req.leaseRevoke) {
      const keys = this.d.lessor.revoke(BigInt(req.leaseRevoke.ID));
      if (keys.length > 0) {
        const txn = mvcc.write();
        try {
          for (const key of keys) txn.deleteRange(key, null);
        } finally {
          txn.end();
        }
      }
      return { header: null };
    }
    if (req.leaseCheckpoint) {
      for (const cp of req.leaseCheckpoint.checkpoints ?? []) {
        this.d.lessor.checkpoint(BigInt(cp.ID), Number(cp.remaining_TTL));
      }
      return { header: null };
    }
    if (req.alarm) return this.applyAlarm(req.alarm);
    if (req.clusterMemberAttrSet) {
      const m = req.clusterMemberAttrSet;
      const id = BigInt(m.member_ID);
      this.d.members.update(id, {
        name: m.memberAttributes?.name ?? '',
        clientUrls: m.memberAttributes?.clientUrls ?? [],
      });
      return { header: null };
    }
    throw new Error(`applier: entry carries no request we know: ${Object.keys(req).join(',')}`);
  }

  private applyAlarm(ar: pb.AlarmRequest): pb.AlarmResponse {
    const memberId = BigInt(ar.memberID);
    const toPb = (a: { memberId: bigint; alarm: number }): pb.AlarmMember => ({
      memberID: a.memberId.toString(),
      alarm: a.alarm,
    });
    // etcd: 0 = GET, 1 = ACTIVATE, 2 = DEACTIVATE.
    switch (ar.action) {
      case 0:
        return { header: null, alarms: this.d.alarms.list().map(toPb) };
      case 1: {
        if (ar.alarm === AlarmType.NONE) return { header: null, alarms: [] };
        const a = { memberId, alarm: ar.alarm };
        const added = this.d.alarms.activate(a);
        if (added) this.d.log.warn('alarm raised', { alarm: alarmName(ar.alarm), 'from': memberId.toString(16) });
        return { header: null, alarms: added ? [toPb(a)] : [] };
      }
      case 2: {
        const a = { memberId, alarm: ar.alarm };
        const removed = this.d.alarms.deactivate(a);
        if (removed) this.d.log.warn('alarm disarmed', { alarm: alarmName(ar.alarm), 'from': memberId.toString(16) });
        return { header: null, alarms: removed ? [toPb(a)] : [] };
      }
      default:
        return { header: null, alarms: [] };
    }
  }
}

function alarmName(a: number): string {
  return a === AlarmType.NOSPACE ? 'NOSPACE' : a === AlarmType.CORRUPT ? 'CORRUPT' : 'NONE';
}
