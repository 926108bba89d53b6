export { NodeAgent } from './agent.js';
export type { AgentOptions } from './agent.js';
