import { tap } from 'node:test/reporters';
import type { TestEvent } from 'node:test/reporters';

/** How much of a failure's message is repeated in the summary. */
const MESSAGE_CHARS = 1_500;

interface Failure {
  file: string;
  name: string;
  message: string;
}

/** The error a test threw, not the runner's wrapper around it. */
function messageOf(error: Error): string {
  const thrown = (error as Error & { cause?: unknown }).cause ?? error;
  const text = thrown instanceof Error ? (thrown.stack ?? `${thrown.name}: ${thrown.message}`) : String(thrown);
  return text.length > MESSAGE_CHARS ? `${text.slice(0, MESSAGE_CHARS)}…` : text;
}

/** A suite fails when one of its tests did: that test is already listed. */
function onlyForSubtests(error: Error): boolean {
  return (error as Error & { failureType?: string }).failureType === 'subtestsFailed';
}

/**
 * `npm test`'s reporter: TAP, as Node writes it, then every failed test again at the very end, with
 * its file and what it threw. A CI log is often read from its tail (the runner's counts), where the
 * failures themselves had scrolled thousands of lines away.
 */
export default async function* failureSummary(source: AsyncIterable<TestEvent>): AsyncGenerator<string, void> {
  const failures: Failure[] = [];
  async function* watched(): AsyncGenerator<TestEvent, void> {
    for await (const event of source) {
      if (event.type === 'test:fail' && !onlyForSubtests(event.data.details.error))
        failures.push({ file: event.data.file ?? '(no file)', name: event.data.name, message: messageOf(event.data.details.error) });
      yield event;
    }
  }
  yield* tap(watched());
  if (failures.length === 0) return;
  yield `\n# ${failures.length} failed (again, from the summary reporter, test/helpers/failure-summary.ts):\n`;
  for (const [i, failure] of failures.entries()) {
    yield `# ${i + 1}. ${failure.file}\n#    ${failure.name}\n`;
    yield `${failure.message.replace(/^/gm, '#      ')}\n`;
  }
}
