// Shapes the API layer shares with its callers (src/main.ts wires them).

/** The logger the adapters write to; src/log provides one in etcd's (zap) shape. */
export interface ApiLogger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  debug(msg: string, fields?: Record<string, unknown>): void;
}

/** What GET /metrics serves; the metrics engineer supplies the function. */
export interface MetricsPayload {
  contentType: string;
  body: string | Buffer;
}
export type MetricsHook = () => Promise<MetricsPayload> | MetricsPayload;
