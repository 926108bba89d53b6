// The closed loop lives with `troupe tune` (cli/tune/closed-loop.ts), which drives load the same way.
export { closedLoop, percentile } from '../../cli/tune/closed-loop.js';
export type { LoadResult } from '../../cli/tune/closed-loop.js';
