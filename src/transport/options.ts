// Bounds and timings of the peer transport. Defaults follow etcd's rafthttp where it has one.
import type * as grpc from '@grpc/grpc-js';

export interface TransportLimits {
  /** Messages queued per peer for the stream (etcd's streamBufSize). */
  maxQueuedMsgsPerPeer: number;
  /** Bytes queued per peer for the stream; MsgApp can carry up to max-request-bytes each. */
  maxQueuedBytesPerPeer: number;
  /** Upper bound of one MessageBatch write (a single larger message still goes alone). */
  maxBatchBytes: number;
  /** Messages per MessageBatch (etcd flushes after streamBufSize/2). */
  maxBatchMsgs: number;
  /** Encoded messages above this go over the chunked Snapshot call, like MsgSnap. */
  maxStreamMsgBytes: number;
  /** Size of one Chunk on the Snapshot call. */
  chunkBytes: number;
  /** Large messages (MsgSnap, oversized) waiting per peer; one is sent at a time. */
  maxPendingLargePerPeer: number;
  /** Largest message accepted over the Snapshot call. */
  maxLargeMessageBytes: number;
  reconnectInitialMs: number;
  reconnectMaxMs: number;
  /** HTTP/2 keepalive ping interval and timeout; a silent dead peer is noticed after about both. */
  keepaliveTimeMs: number;
  keepaliveTimeoutMs: number;
  /** How often each peer is probed for its round-trip time (etcd's proberInterval, ConnReadTimeout - 1s). */
  proberIntervalMs: number;
  /** A probe not answered within this counts as failed (etcd's ConnReadTimeout). */
  proberTimeoutMs: number;
  /** Status check period while the peer is healthy (etcd's statusMonitoringInterval). */
  proberStatusMonitorIntervalMs: number;
  /** First status check, and the period while unhealthy (etcd's statusErrorInterval). */
  proberStatusErrorIntervalMs: number;
}

const MiB = 1024 * 1024;

/** grpc-js's default receive limit per message, which the Stream call keeps (a batch is at most ~2 MiB). */
export const GRPC_MAX_RECEIVE_BYTES = 4 * MiB;

export const DEFAULT_LIMITS: TransportLimits = {
  maxQueuedMsgsPerPeer: 4096,
  maxQueuedBytesPerPeer: 64 * MiB,
  maxBatchBytes: 1 * MiB,
  maxBatchMsgs: 2048,
  // Stays under grpc-js's default 4 MiB receive limit with the batch framing.
  maxStreamMsgBytes: 2 * MiB,
  chunkBytes: 512 * 1024,
  maxPendingLargePerPeer: 4,
  // Node 20 Buffers stop at 4 GiB.
  maxLargeMessageBytes: 4 * 1024 * MiB - 1,
  reconnectInitialMs: 100,
  reconnectMaxMs: 2000,
  keepaliveTimeMs: 5000,
  keepaliveTimeoutMs: 5000,
  proberIntervalMs: 4000,
  proberTimeoutMs: 5000,
  proberStatusMonitorIntervalMs: 30_000,
  proberStatusErrorIntervalMs: 5000,
};

export function channelOptions(l: TransportLimits): grpc.ChannelOptions {
  return {
    // One connection per (local member, peer), even when members share a process (tests).
    'grpc.use_local_subchannel_pool': 1,
    // grpc-js's own reconnect backoff reaches 120s by default; a restarted peer must be
    // reachable again within an election timeout or two.
    'grpc.initial_reconnect_backoff_ms': l.reconnectInitialMs,
    'grpc.max_reconnect_backoff_ms': l.reconnectMaxMs,
    'grpc.keepalive_time_ms': l.keepaliveTimeMs,
    'grpc.keepalive_timeout_ms': l.keepaliveTimeoutMs,
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': -1,
  };
}
