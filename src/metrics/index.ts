export { createMetrics, exponentialBuckets } from './metrics';
export type { EtcdMetrics, MetricsOptions, ServerMetrics, DiskMetrics, MvccMetrics, LeaseMetrics, NetworkMetrics } from './metrics';
export type { GrpcServerMetrics, GrpcMethodMetrics } from './grpc';
export { ETCD_GRPC_METHODS, GRPC_CODE_NAMES, grpcCodeName } from './grpcmethods';
export type { GrpcType, GrpcMethodInfo } from './grpcmethods';
