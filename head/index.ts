export { DEFAULT_DRAIN_MS, startHead } from './server.js';
export type { Head, HeadOptions, HeadTlsOptions } from './server.js';
export { DEFAULT_GRPC_PORT } from './grpc/server.js';
