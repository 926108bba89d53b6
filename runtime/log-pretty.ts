/**
 * pino's JSON lines made readable for a person at a terminal (`--log-format pretty`):
 * `19:26:39.123 INFO  head head listening  url=http://127.0.0.1:8470 httpWorkers=2`.
 * Written here rather than with pino-pretty: it is a dozen lines, and a dependency less.
 */

const LEVELS: Record<number, { label: string; color: string }> = {
  10: { label: 'TRACE', color: '90' },
  20: { label: 'DEBUG', color: '90' },
  30: { label: 'INFO', color: '32' },
  40: { label: 'WARN', color: '33' },
  50: { label: 'ERROR', color: '31' },
  60: { label: 'FATAL', color: '35' },
};

/** Fields every line carries, shown in its prefix rather than as key=value. */
const PREFIX_FIELDS = new Set(['level', 'time', 'hostname', 'name', 'msg', 'err']);

const paint = (color: boolean, code: string, text: string) => (color ? `\u001b[${code}m${text}\u001b[0m` : text);

function clock(time: unknown): string {
  const d = typeof time === 'number' ? new Date(time) : new Date();
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, '0')}`;
}

/** A value as key=value shows it: bare when it is a word or a number, JSON otherwise. */
function shown(value: unknown): string {
  if (typeof value === 'string' && /^[^\s"=]+$/.test(value)) return value;
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  return JSON.stringify(value) ?? String(value);
}

/** One JSON log line as one readable line (plus an error's stack, indented); other text unchanged. */
export function prettyLine(line: string, color: boolean): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`;
  }
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return `${line.trimEnd()}\n`;
  const level = LEVELS[entry.level as number] ?? { label: String(entry.level ?? '?').toUpperCase(), color: '0' };
  const component = typeof entry.name === 'string' ? entry.name.replace(/^troupe-/, '') : 'troupe';
  const fields = Object.entries(entry)
    .filter(([key]) => !PREFIX_FIELDS.has(key))
    .map(([key, value]) => `${paint(color, '2', `${key}=`)}${shown(value)}`);
  const msg = typeof entry.msg === 'string' ? entry.msg : '';
  let out = `${paint(color, '2', clock(entry.time))} ${paint(color, level.color, level.label.padEnd(5))} ${paint(color, '36', component)} ${msg}${fields.length ? `  ${fields.join(' ')}` : ''}\n`;
  const err = entry.err as { message?: unknown; stack?: unknown } | undefined;
  if (err && typeof err === 'object') {
    const text = typeof err.stack === 'string' ? err.stack : String(err.message ?? JSON.stringify(err));
    out += `${text.replace(/^/gm, '    ')}\n`;
  }
  return out;
}

/** A pino destination writing each line to `stream`, readable (see prettyLine). */
export function prettyDestination(stream: NodeJS.WriteStream): { write(line: string): void } {
  const color = stream.isTTY === true && !('NO_COLOR' in process.env);
  return { write: (line: string) => void stream.write(prettyLine(line, color)) };
}
