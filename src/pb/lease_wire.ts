// Hand-written codec of the lease keepalive stream's messages: every keepalive decodes one
// request and encodes one response, and protobufjs with Long int64s was ~13% of that path's
// CPU. Same objects as proto-loader gives (ID as a decimal string, '0' when absent), the same
// bytes as the KV encoders write (zero scalars omitted, as etcd's encoder does). Anything
// unexpected throws NotFast and the caller falls back to protobufjs.
import type * as pb from './types';
import { headerFieldSize, writeHeaderField } from './kv_wire';
import { NotFast, Reader, WIRE_VARINT, Writer, int64FieldSize, writeInt64Field } from './wire';

/** etcdserverpb.LeaseKeepAliveRequest: 1 ID (int64). */
export function decodeLeaseKeepAliveRequest(buf: Buffer): pb.LeaseKeepAliveRequest {
  const r = new Reader(buf);
  const m: pb.LeaseKeepAliveRequest = { ID: '0' };
  while (r.pos < r.end) {
    const t = r.tag();
    const wt = t & 7;
    if (t >>> 3 === 1) {
      if (wt !== WIRE_VARINT) throw new NotFast('unexpected wire type');
      m.ID = r.int64String();
    } else {
      r.skip(wt);
    }
  }
  if (r.pos !== r.end) throw new NotFast('field overruns its message');
  return m;
}

/** etcdserverpb.LeaseKeepAliveResponse: 1 header, 2 ID (int64), 3 TTL (int64). */
export function encodeLeaseKeepAliveResponse(resp: pb.LeaseKeepAliveResponse): Buffer {
  const o = resp as unknown as Record<string, unknown>;
  if (o === null || typeof o !== 'object') throw new NotFast('message type');
  const size = headerFieldSize(o.header) + int64FieldSize(o.ID) + int64FieldSize(o.TTL);
  const w = new Writer(Buffer.allocUnsafe(size));
  writeHeaderField(w, o.header);
  writeInt64Field(w, 0x10, o.ID);
  writeInt64Field(w, 0x18, o.TTL);
  return w.done();
}
