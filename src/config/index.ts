export { parseConfig } from './parse';
export type { Config, ConfigNotice, ParseResult, TlsFiles } from './types';
export type { EtcdUrl } from './urls';
export { parseEtcdUrl, parseEtcdUrlList, parseInitialCluster } from './urls';
export { parseGoDuration, parseGoBool } from './goparse';
export { USAGE_TEXT, FLAGS_TEXT } from './help';
export { FLAG_SPECS, IGNORED_FLAGS } from './flags';
export { flagToEnv } from './env';
export type { ServerFeature } from './featuregates';
export {
  ETCD_VERSION,
  ETCD_CLUSTER_VERSION,
  ETCD_STORAGE_VERSION,
  ETCD_MIN_CLUSTER_VERSION,
  ETCD_API_VERSION,
  GIT_SHA,
  versionText,
} from './version';
export { emitNotices, reportParseResult, loggerForConfig } from './report';
