export { startHead } from './server.js';
export type { Head, HeadOptions } from './server.js';
