/**
 * Node flags for Troupe's child processes. With `TROUPE_PROFILE_DIR` set, every head, agent and
 * actor process writes a V8 CPU profile there when it exits (`--cpu-prof`, which Node refuses in
 * NODE_OPTIONS), for flame graphs of the whole hot path.
 */
export function childNodeArgs(): string[] {
  const dir = process.env.TROUPE_PROFILE_DIR;
  return dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [];
}
