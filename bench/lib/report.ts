/** The middle value of `xs` (the upper of the two middle ones for an even count). */
export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** A benchmark's report: each line printed as it comes, and kept in `lines` for its RESULTS file. */
export function report(): { say: (text: string) => void; lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    say: (text) => {
      lines.push(text);
      process.stdout.write(`${text}\n`);
    },
  };
}
