/**
 * A progress bar on a terminal (`stream.isTTY`), redrawn in place: how many of the layouts are
 * measured, and which one now. Not a terminal (a pipe, a file, CI): nothing, so what is read or
 * kept holds only the results.
 */
export function progressBar(stream: NodeJS.WriteStream, total: number): { update(done: number, now: string): void; done(): void } {
  if (!stream.isTTY) return { update: () => {}, done: () => {} };
  const width = 24;
  let shown = false;
  return {
    update(done, now) {
      const filled = Math.round((done / total) * width);
      const columns = stream.columns ?? 80;
      const line = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${done}/${total} ${now}`;
      stream.write(`\r\x1b[K${line.slice(0, columns - 1)}`);
      shown = true;
    },
    done() {
      if (shown) stream.write('\r\x1b[K');
      shown = false;
    },
  };
}
