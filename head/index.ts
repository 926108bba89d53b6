export { startHead } from './server.js';
export type { Head, HeadOptions } from './server.js';
export { DEFAULT_GRPC_PORT } from './grpc/server.js';
