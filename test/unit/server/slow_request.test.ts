// The request text of etcd's "apply request took too long" warning: protobuf text as etcd's
// loggable stringers write it, values reduced to their size, secrets left out.
import { describe, expect, it } from 'vitest';
import { describeInternalRequest, describeRange } from '../../../src/server/slow_request';
import type * as pb from '../../../src/pb/types';

const req = (r: Record<string, unknown>): pb.InternalRaftRequest => ({ header: { ID: '7', username: '', authRevision: '0' }, ...r }) as unknown as pb.InternalRaftRequest;

describe('slow request descriptions', () => {
  it('a put shows its key and value size, never its value', () => {
    const s = describeInternalRequest(req({ put: { key: Buffer.from('foo'), value: Buffer.from('secret-value'), lease: '0', prevKv: true } }));
    expect(s).toBe('header:<ID:7 > put:<key:"foo" value_size:12 prev_kv:true >');
    expect(s).not.toContain('secret');
  });

  it('a txn lists its compares and operations', () => {
    const s = describeInternalRequest(
      req({
        txn: {
          compare: [{ result: 0, target: 2, key: Buffer.from('k'), modRevision: '5', targetUnion: 'modRevision', rangeEnd: Buffer.alloc(0) }],
          success: [{ requestPut: { key: Buffer.from('k'), value: Buffer.from('vv'), lease: '0' } }],
          failure: [{ requestRange: { key: Buffer.from('k'), rangeEnd: Buffer.alloc(0), limit: '0', revision: '0' } }],
        },
      }),
    );
    expect(s).toBe(
      'header:<ID:7 > txn:<compare:<target:MOD key:"k" mod_revision:5 > success:<request_put:<key:"k" value_size:2 > > failure:<request_range:<key:"k" > > >',
    );
  });

  it('escapes bytes that are not printable and cuts long keys', () => {
    expect(describeRange({ key: Buffer.from([0x61, 0x00, 0x22, 0xff]), rangeEnd: Buffer.from([0]) } as unknown as pb.RangeRequest)).toBe(
      'key:"a\\000\\"\\377" range_end:"\\000" ',
    );
    const long = describeRange({ key: Buffer.alloc(1000, 0x6b) } as unknown as pb.RangeRequest);
    expect(long).toBe(`key:"${'k'.repeat(256)}..." `);
  });

  it('names only the kind of request that may carry a password', () => {
    const s = describeInternalRequest(req({ authUserAdd: { name: 'alice', password: 'hunter2' } }));
    expect(s).toBe('header:<ID:7 > auth_user_add:<>');
  });

  it('writes lease IDs in hex as etcd does', () => {
    expect(describeInternalRequest(req({ leaseGrant: { TTL: '10', ID: '255' } }))).toBe('header:<ID:7 > lease_grant:<ttl:10-second id:00000000000000ff>');
  });
});
