/**
 * Runs `onGone` when the parent that started this process over an IPC channel goes away, even by
 * SIGKILL (the channel closes). A child can lose its parent while it is still starting up, before
 * it listens for 'disconnect'; the event is then already past, so the channel's state is checked
 * as well. Processes started without an IPC channel (by hand) are unaffected.
 */
export function onParentGone(onGone: () => void): void {
  if (!process.send) return;
  process.once('disconnect', onGone);
  if (!process.connected) onGone();
}
