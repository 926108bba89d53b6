import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { childEnv } from './env.js';

/**
 * Triton's and KServe's Python clients and Triton's perf_analyzer, from the folder
 * scripts/python-clients.sh fills (.venv-clients/, pinned by test/python/requirements*.txt; .ci/run
 * runs it). Found by this path only, never through PATH or a python3 found elsewhere, so what a
 * test runs is the pinned set or nothing.
 */
export const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const VENV = join(REPO, '.venv-clients');
export const CLIENTS_PYTHON = join(VENV, 'bin', 'python');
const PERF_ANALYZER_DIR = join(VENV, 'perf-analyzer');
export const PERF_ANALYZER = join(PERF_ANALYZER_DIR, 'bin', 'perf_analyzer');
/** perf_analyzer links the CUDA runtime even without a GPU; the wheel beside it carries it. */
const CUDA_RUNTIME = join(PERF_ANALYZER_DIR, 'nvidia', 'cuda_runtime', 'lib');

/** Why the clients cannot run here, or undefined when the pinned set is installed. */
export const clientsMissing = existsSync(join(VENV, '.pins'))
  ? undefined
  : `${VENV} is not installed (scripts/python-clients.sh installs it; .ci/run runs that)`;

/** Runs a file, bounded; resolves with its output whatever its exit status, which it names. */
export function runFile(
  file: string,
  args: string[],
  options: { timeoutMs: number; env?: NodeJS.ProcessEnv },
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { timeout: options.timeoutMs, maxBuffer: 64 << 20, env: childEnv(options.env), encoding: 'utf8' },
      (err, stdout, stderr) => {
        const status = err ? (typeof err.code === 'number' ? err.code : null) : 0;
        resolve({ status, stdout, stderr: err && status === null ? `${stderr}\n${err.message}` : stderr });
      },
    );
  });
}

/** Runs one of test/python/*.py with the clients' interpreter and parses the JSON object it prints. */
export async function runClientScript<T>(script: string, args: string[], timeoutMs = 120_000): Promise<T> {
  // Nothing from the caller's Python setup (a PYTHONPATH, user site-packages) reaches the clients.
  const env = { PYTHONPATH: undefined, PYTHONHOME: undefined, PYTHONNOUSERSITE: '1' };
  const run = await runFile(CLIENTS_PYTHON, [join(REPO, 'test', 'python', script), ...args], { timeoutMs, env });
  if (run.status !== 0) throw new Error(`${script} exited ${run.status}:\n${run.stderr.slice(-4000)}`);
  return JSON.parse(run.stdout) as T;
}

/** One concurrency level of a perf_analyzer run, from its CSV (-f): client-side figures. */
export interface PerfAnalyzerRow {
  concurrency: number;
  inferPerSecond: number;
  p50Us: number;
  p90Us: number;
  p99Us: number;
}

export interface PerfAnalyzerRun {
  status: number | null;
  output: string;
  rows: PerfAnalyzerRow[];
  /** Lines of its output that report a failed request or measurement; empty when none did. */
  errors: string[];
}

/** What perf_analyzer prints when a request fails (then it stops) or a measurement cannot be made. */
const ERROR_LINE = /error|failed|unable|invalid/i;

/**
 * Runs perf_analyzer with `args` (plus `-f` to a CSV in `workDir`) and parses its CSV. perf_analyzer
 * stops at the first failed request ("Thread [i] had error: ...", exit status non-zero), so a run
 * with status 0, no error line and a row for each concurrency had no failed request.
 */
export async function perfAnalyzer(args: string[], workDir: string, timeoutMs: number): Promise<PerfAnalyzerRun> {
  const csv = join(workDir, `perf-${Date.now()}-${Math.random().toString(36).slice(2)}.csv`);
  const run = await runFile(PERF_ANALYZER, [...args, '-f', csv], { timeoutMs, env: { LD_LIBRARY_PATH: CUDA_RUNTIME } });
  const output = `${run.stdout}\n${run.stderr}`;
  const rows: PerfAnalyzerRow[] = [];
  if (existsSync(csv)) {
    const [header, ...lines] = (await readFile(csv, 'utf8')).trim().split('\n');
    const names = (header ?? '').split(',');
    const column = (cells: string[], name: string) => Number(cells[names.indexOf(name)]);
    for (const line of lines) {
      const cells = line.split(',');
      rows.push({
        concurrency: column(cells, 'Concurrency'),
        inferPerSecond: column(cells, 'Inferences/Second'),
        p50Us: column(cells, 'p50 latency'),
        p90Us: column(cells, 'p90 latency'),
        p99Us: column(cells, 'p99 latency'),
      });
    }
    rows.sort((a, b) => a.concurrency - b.concurrency);
  }
  return { status: run.status, output, rows, errors: output.split('\n').filter((line) => ERROR_LINE.test(line)) };
}
