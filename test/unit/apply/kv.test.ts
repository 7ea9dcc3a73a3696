import { afterEach, describe, expect, it } from 'vitest';
import { applyCompaction, applyDeleteRange, applyPut, applyRange, applyTxn } from '../../../src/apply/kv';
import { EtcdError } from '../../../src/errors';
import type * as pb from '../../../src/pb/types';
import { closeStore, openStore } from '../mvcc/helpers';
import { cmp, delReq, FakeLeases, op, putReq, rangeReq, txnReq } from './kv_helpers';

type S = ReturnType<typeof openStore>;
const opened: S[] = [];
afterEach(async () => {
  for (const s of opened.splice(0)) await closeStore(s).catch(() => undefined);
});

function setup(leaseIds: bigint[] = []) {
  const s = openStore();
  opened.push(s);
  const leases = new FakeLeases(leaseIds);
  const put = (req: pb.PutRequest) =>
    s.backend.batch(() => {
      const t = s.store.write();
      try {
        return applyPut(t, leases, req);
      } finally {
        t.end();
      }
    });
  const del = (req: pb.DeleteRangeRequest) =>
    s.backend.batch(() => {
      const t = s.store.write();
      try {
        return applyDeleteRange(t, leases, req);
      } finally {
        t.end();
      }
    });
  const txn = (req: pb.TxnRequest) => s.backend.batch(() => applyTxn(s.store, leases, req));
  const range = (req: pb.RangeRequest) => applyRange(s.store, req);
  return { ...s, leases, put, del, txn, range };
}

function etcdErr(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof EtcdError) return e.message;
    throw e;
  }
  return 'no error';
}

const keys = (r: pb.RangeResponse) => r.kvs.map((kv) => kv.key.toString());

describe('applyRange', () => {
  function populate() {
    const x = setup();
    // a: created 2, modified 6 (version 2); b: 3; c: 4 ; d: 5
    x.put(putReq('a', 'z'));
    x.put(putReq('b', 'y'));
    x.put(putReq('c', 'x'));
    x.put(putReq('d', 'x'));
    x.put(putReq('a', 'w'));
    return x;
  }

  it('limit, more and count', () => {
    const x = populate();
    const r = x.range(rangeReq('a', { rangeEnd: 'e', limit: '2' }));
    expect(keys(r)).toEqual(['a', 'b']);
    expect(r.more).toBe(true);
    expect(r.count).toBe('4');
    expect(r.header?.revision).toBe('6');
    const r2 = x.range(rangeReq('a', { rangeEnd: 'e', limit: '4' }));
    expect(r2.more).toBe(false);
    const co = x.range(rangeReq('a', { rangeEnd: 'e', countOnly: true }));
    expect(co.kvs).toEqual([]);
    expect(co.count).toBe('4');
    expect(co.more).toBe(false);
    const ko = x.range(rangeReq('a', { keysOnly: true }));
    expect(ko.kvs[0].value.length).toBe(0);
    expect(ko.kvs[0].version).toBe('2');
    const missing = x.range(rangeReq('zz'));
    expect(missing).toMatchObject({ kvs: [], count: '0', more: false });
  });

  it('sorts by every target; NONE with a non-KEY target means ascend', () => {
    const x = populate();
    const all = { rangeEnd: Buffer.from([0]) };
    expect(keys(x.range(rangeReq('a', { ...all, sortTarget: 0, sortOrder: 2 })))).toEqual(['d', 'c', 'b', 'a']);
    expect(keys(x.range(rangeReq('a', { ...all, sortTarget: 4, sortOrder: 0 })))).toEqual(['a', 'c', 'd', 'b']); // value w,x,x,y ascend
    expect(keys(x.range(rangeReq('a', { ...all, sortTarget: 4, sortOrder: 2 })))).toEqual(['b', 'c', 'd', 'a']);
    expect(keys(x.range(rangeReq('a', { ...all, sortTarget: 3, sortOrder: 2 })))).toEqual(['a', 'd', 'c', 'b']); // mod
    expect(keys(x.range(rangeReq('a', { ...all, sortTarget: 2, sortOrder: 1 })))).toEqual(['a', 'b', 'c', 'd']); // create
    expect(keys(x.range(rangeReq('a', { ...all, sortTarget: 1, sortOrder: 2 })))).toEqual(['a', 'b', 'c', 'd']); // version: a=2, ties keep key order
    // keys_only still sorts by the values (dropped afterwards).
    const kv = x.range(rangeReq('a', { ...all, sortTarget: 4, sortOrder: 2, keysOnly: true }));
    expect(keys(kv)).toEqual(['b', 'c', 'd', 'a']);
    expect(kv.kvs.every((k) => k.value.length === 0)).toBe(true);
    // Sort happens before the limit.
    const r = x.range(rangeReq('a', { ...all, sortTarget: 3, sortOrder: 2, limit: '1' }));
    expect(keys(r)).toEqual(['a']);
    expect(r.more).toBe(true);
    expect(r.count).toBe('4');
  });

  it('filters by mod/create revision after the fetch; count ignores filters', () => {
    const x = populate();
    const all = { rangeEnd: Buffer.from([0]) };
    const r = x.range(rangeReq('a', { ...all, minModRevision: '4', maxModRevision: '5' }));
    expect(keys(r)).toEqual(['c', 'd']);
    expect(r.count).toBe('4');
    const r2 = x.range(rangeReq('a', { ...all, minCreateRevision: '3', limit: '1' }));
    expect(keys(r2)).toEqual(['b']);
    expect(r2.more).toBe(true);
    expect(keys(x.range(rangeReq('a', { ...all, maxCreateRevision: '3' })))).toEqual(['a', 'b']);
  });

  it('reads at an old revision and reports the current revision', () => {
    const x = populate();
    const r = x.range(rangeReq('a', { revision: '2' }));
    expect(r.kvs[0].value.toString()).toBe('z');
    expect(r.header?.revision).toBe('6');
    expect(etcdErr(() => x.range(rangeReq('a', { revision: '7' })))).toBe('etcdserver: mvcc: required revision is a future revision');
    x.backend.batch(() => applyCompaction(x.store, { revision: '4', physical: false }));
    expect(etcdErr(() => x.range(rangeReq('a', { revision: '3' })))).toBe('etcdserver: mvcc: required revision has been compacted');
    expect(x.range(rangeReq('a', { revision: '4' })).kvs[0].value.toString()).toBe('z');
  });
});

describe('applyPut', () => {
  for (const watchersWantPrev of [true, false]) {
    it(`returns prev_kv, the new revision, and manages lease attachment (watchers ${watchersWantPrev ? 'want' : 'do not want'} prev_kv)`, () => {
      const x = setup([10n, 11n]);
      // Without prev_kv watchers a put reads the previous value only for its own answer.
      x.store.eventsNeedPrevKv = () => watchersWantPrev;
      const r1 = x.put(putReq('k', 'v1', { lease: '10', prevKv: true }));
      expect(r1.prevKv).toBeNull();
      expect(r1.header?.revision).toBe('2');
      expect(x.leases.keys(10n)).toEqual(['k']);
      const r2 = x.put(putReq('k', 'v2', { lease: '11', prevKv: true }));
      expect(r2.prevKv).toMatchObject({ value: Buffer.from('v1'), lease: '10', version: '1', modRevision: '2', createRevision: '2' });
      expect(x.leases.keys(10n)).toEqual([]);
      expect(x.leases.keys(11n)).toEqual(['k']);
      const r3 = x.put(putReq('k', 'v3'));
      expect(r3.prevKv).toBeNull(); // not asked
      expect(x.leases.keys(11n)).toEqual([]);
      // Version and create revision come from the key index either way.
      expect(x.range(rangeReq('k')).kvs[0]).toMatchObject({ value: Buffer.from('v3'), lease: '0', version: '3', modRevision: '4', createRevision: '2' });
    });
  }

  it('rejects an empty key with etcd\'s error, not a crash', () => {
    const x = setup();
    expect(etcdErr(() => x.put(putReq('', 'v')))).toBe('etcdserver: key is not provided');
    expect(x.store.currentRevision()).toBe(1);
  });

  it('rejects a missing lease without writing', () => {
    const x = setup();
    expect(etcdErr(() => x.put(putReq('k', 'v', { lease: '99' })))).toBe('etcdserver: requested lease not found');
    expect(x.store.currentRevision()).toBe(1);
  });

  it('ignore_value / ignore_lease keep the old value or lease; need an existing key', () => {
    const x = setup([5n, 6n]);
    expect(etcdErr(() => x.put(putReq('k', '', { ignoreValue: true })))).toBe('etcdserver: key not found');
    expect(etcdErr(() => x.put(putReq('k', '', { ignoreLease: true })))).toBe('etcdserver: key not found');
    expect(x.store.currentRevision()).toBe(1);
    x.put(putReq('k', 'orig', { lease: '5' }));
    x.put(putReq('k', '', { ignoreValue: true, lease: '6' }));
    let kv = x.range(rangeReq('k')).kvs[0];
    expect(kv.value.toString()).toBe('orig');
    expect(kv.lease).toBe('6');
    expect(x.leases.keys(5n)).toEqual([]);
    expect(x.leases.keys(6n)).toEqual(['k']);
    x.put(putReq('k', 'new', { ignoreLease: true }));
    kv = x.range(rangeReq('k')).kvs[0];
    expect(kv.value.toString()).toBe('new');
    expect(kv.lease).toBe('6');
    expect(x.leases.keys(6n)).toEqual(['k']);
    expect(etcdErr(() => x.put(putReq('k', 'x', { ignoreValue: true })))).toBe('etcdserver: value is provided');
    expect(etcdErr(() => x.put(putReq('k', '', { ignoreLease: true, lease: '6' })))).toBe('etcdserver: lease is provided');
  });
});

describe('applyDeleteRange', () => {
  it('deletes single keys and ranges, returns prev_kvs when asked, detaches leases', () => {
    const x = setup([3n]);
    for (const k of ['a', 'b', 'c', 'd']) x.put(putReq(k, `v${k}`, { lease: k === 'b' ? '3' : '0' }));
    const none = x.del(delReq('zz'));
    expect(none.deleted).toBe('0');
    expect(none.header?.revision).toBe('5'); // nothing deleted: no new revision
    const r = x.del(delReq('a', 'c', true));
    expect(r.deleted).toBe('2');
    expect(r.header?.revision).toBe('6');
    expect(r.prevKvs.map((kv) => kv.key.toString())).toEqual(['a', 'b']);
    expect(x.leases.keys(3n)).toEqual([]);
    const r2 = x.del(delReq('c', Buffer.from([0])));
    expect(r2.deleted).toBe('2');
    expect(r2.prevKvs).toEqual([]);
    expect(x.range(rangeReq('a', { rangeEnd: Buffer.from([0]) })).count).toBe('0');
  });
});

describe('applyTxn', () => {
  it('compares every target and result; a range compare needs every key to match', () => {
    const x = setup([7n]);
    x.put(putReq('a', '1', { lease: '7' })); // 2
    x.put(putReq('b', '2')); // 3
    const ok = (c: pb.Compare) => x.txn(txnReq([c], [])).succeeded;
    expect(ok(cmp('a', 'value', '=', '1'))).toBe(true);
    expect(ok(cmp('a', 'value', '<', '2'))).toBe(true);
    expect(ok(cmp('a', 'value', '>', '0'))).toBe(true);
    expect(ok(cmp('a', 'value', '!=', '1'))).toBe(false);
    expect(ok(cmp('a', 'version', '=', '1'))).toBe(true);
    expect(ok(cmp('a', 'createRevision', '=', '2'))).toBe(true);
    expect(ok(cmp('b', 'modRevision', '>', '2'))).toBe(true);
    expect(ok(cmp('a', 'lease', '=', '7'))).toBe(true);
    // Missing keys compare as zero, except values which always fail.
    expect(ok(cmp('nope', 'version', '=', '0'))).toBe(true);
    expect(ok(cmp('nope', 'createRevision', '=', '0'))).toBe(true);
    expect(ok(cmp('nope', 'value', '=', ''))).toBe(false);
    expect(ok(cmp('nope', 'value', '!=', 'x'))).toBe(false);
    // Over a range: every key must satisfy.
    expect(ok(cmp('a', 'modRevision', '>', '1', 'c'))).toBe(true);
    expect(ok(cmp('a', 'modRevision', '>', '2', 'c'))).toBe(false);
    expect(ok(cmp('a', 'version', '=', '1', Buffer.from([0])))).toBe(true);
  });

  it('writes every op at one revision; later ranges see earlier writes; header revisions', () => {
    const x = setup();
    x.put(putReq('a', '0')); // 2
    const r = x.txn(
      txnReq(
        [cmp('a', 'value', '=', '0')],
        [op.put(putReq('a', '1', { prevKv: true })), op.range(rangeReq('a')), op.put(putReq('b', '1')), op.del(delReq('a', undefined, true)), op.range(rangeReq('a', { rangeEnd: 'c' }))],
        [op.range(rangeReq('a'))],
      ),
    );
    expect(r.succeeded).toBe(true);
    expect(r.header?.revision).toBe('3');
    expect(r.responses.map((x) => x.response)).toEqual(['responsePut', 'responseRange', 'responsePut', 'responseDeleteRange', 'responseRange']);
    expect(r.responses[0].responsePut?.prevKv?.value.toString()).toBe('0');
    expect(r.responses[0].responsePut?.header?.revision).toBe('3');
    expect(r.responses[1].responseRange?.kvs[0].value.toString()).toBe('1');
    expect(r.responses[1].responseRange?.header?.revision).toBe('3');
    expect(r.responses[3].responseDeleteRange?.prevKvs[0].value.toString()).toBe('1');
    expect(keys(r.responses[4].responseRange!)).toEqual(['b']);
    expect(x.store.currentRevision()).toBe(3);
    // b was created at 3, version 1 (one write inside the txn).
    expect(x.range(rangeReq('b')).kvs[0]).toMatchObject({ createRevision: '3', modRevision: '3', version: '1' });
    // Failure branch; a read-only txn does not advance the revision.
    const f = x.txn(txnReq([cmp('a', 'value', '=', '0')], [op.put(putReq('x', 'y'))], [op.range(rangeReq('b'))]));
    expect(f.succeeded).toBe(false);
    expect(f.header?.revision).toBe('3');
    expect(f.responses[0].responseRange?.kvs[0].key.toString()).toBe('b');
    expect(x.store.currentRevision()).toBe(3);
  });

  it('nested txns: compares see the state before the txn; one revision for all', () => {
    const x = setup();
    x.put(putReq('k', 'old')); // 2
    const r = x.txn(
      txnReq(
        [],
        [
          op.put(putReq('k', 'new')),
          // Evaluated before the outer put: k is still "old".
          op.txn(txnReq([cmp('k', 'value', '=', 'old')], [op.put(putReq('n', 'saw-old')), op.range(rangeReq('k'))], [op.put(putReq('n', 'saw-new'))])),
        ],
      ),
    );
    expect(r.succeeded).toBe(true);
    expect(r.header?.revision).toBe('3');
    const inner = r.responses[1].responseTxn!;
    expect(inner.succeeded).toBe(true);
    expect(inner.header?.revision).toBe('0'); // etcd leaves nested txn headers at 0
    expect(inner.responses[1].responseRange?.kvs[0].value.toString()).toBe('new');
    expect(x.range(rangeReq('n')).kvs[0].value.toString()).toBe('saw-old');
    expect(x.range(rangeReq('n')).kvs[0].modRevision).toBe('3');
  });

  it('rejects bad ops before writing anything', () => {
    const x = setup([1n]);
    x.put(putReq('a', '1')); // 2
    const cases: Array<[pb.TxnRequest, string]> = [
      [txnReq([], [op.put(putReq('b', '1')), op.put(putReq('c', '', { ignoreValue: true }))]), 'etcdserver: key not found'],
      [txnReq([], [op.put(putReq('b', '1')), op.put(putReq('c', 'x', { lease: '42' }))]), 'etcdserver: requested lease not found'],
      [txnReq([], [op.put(putReq('b', '1')), op.range(rangeReq('a', { revision: '9' }))]), 'etcdserver: mvcc: required revision is a future revision'],
      [txnReq([], [op.txn(txnReq([], [op.put(putReq('b', '1')), op.put(putReq('zz', '', { ignoreLease: true }))]))]), 'etcdserver: key not found'],
      [txnReq([], [op.put(putReq('b', '1')), op.put(putReq('', 'x'))]), 'etcdserver: key is not provided'],
      // Delete then ignore_value put of the same key in one txn: the key is gone by then.
      [txnReq([], [op.del(delReq('a')), op.put(putReq('a', '', { ignoreValue: true }))]), 'etcdserver: key not found'],
    ];
    for (const [req, msg] of cases) {
      expect(etcdErr(() => x.txn(req))).toBe(msg);
      expect(x.store.currentRevision()).toBe(2);
    }
    expect(x.range(rangeReq('b')).kvs).toEqual([]);
    // The ops of the branch not taken are not checked.
    const r = x.txn(txnReq([cmp('a', 'value', '=', '1')], [op.put(putReq('b', '1'))], [op.put(putReq('zz', '', { ignoreValue: true }))]));
    expect(r.succeeded).toBe(true);
    // ignore_value on a key put earlier in the same txn is fine.
    const r2 = x.txn(txnReq([], [op.put(putReq('fresh', 'v')), op.put(putReq('fresh', '', { ignoreValue: true, lease: '1' }))]));
    expect(r2.succeeded).toBe(true);
    expect(x.range(rangeReq('fresh')).kvs[0]).toMatchObject({ value: Buffer.from('v'), lease: '1', version: '2' });
  });

  it('etcd 3.4 crash case: Put ignore_value on a missing key inside a txn returns KeyNotFound', () => {
    const x = setup();
    expect(etcdErr(() => x.txn(txnReq([], [op.put(putReq('missing', '', { ignoreValue: true }))])))).toBe('etcdserver: key not found');
    // The store keeps working.
    x.put(putReq('after', 'ok'));
    expect(x.range(rangeReq('after')).kvs[0].value.toString()).toBe('ok');
  });

  it('a read-only txn runs outside a batch', () => {
    const x = setup();
    x.put(putReq('a', '1'));
    const r = applyTxn(x.store, x.leases, txnReq([cmp('a', 'version', '>', '0')], [op.range(rangeReq('a'))]));
    expect(r.succeeded).toBe(true);
    expect(r.header?.revision).toBe('2');
  });
});

describe('applyCompaction', () => {
  it('compacts and reports the current revision; errors for old and future revisions', async () => {
    const x = setup();
    x.put(putReq('a', '1'));
    x.put(putReq('a', '2'));
    const { resp, done } = x.backend.batch(() => applyCompaction(x.store, { revision: '2', physical: true }));
    expect(resp.header?.revision).toBe('3');
    await done;
    expect(etcdErr(() => x.backend.batch(() => applyCompaction(x.store, { revision: '2', physical: false })))).toBe('etcdserver: mvcc: required revision has been compacted');
    expect(etcdErr(() => x.backend.batch(() => applyCompaction(x.store, { revision: '4', physical: false })))).toBe('etcdserver: mvcc: required revision is a future revision');
  });
});

describe('int64 fields', () => {
  it('parses decimal strings exactly and clamps beyond 2^53', async () => {
    const { int64ToNumber, int64ToBigInt } = await import('../../../src/apply/kv_convert');
    expect(int64ToNumber('0')).toBe(0);
    expect(int64ToNumber('-5')).toBe(-5);
    expect(int64ToNumber('123456789012345')).toBe(123456789012345);
    expect(int64ToNumber('9223372036854775807')).toBe(Number.MAX_SAFE_INTEGER);
    expect(int64ToNumber('-9223372036854775808')).toBe(Number.MIN_SAFE_INTEGER);
    expect(int64ToNumber('')).toBe(0);
    expect(int64ToBigInt('9223372036854775807')).toBe(9223372036854775807n);
    expect(int64ToBigInt('-1')).toBe(-1n);
    expect(int64ToBigInt('0')).toBe(0n);
  });
});
