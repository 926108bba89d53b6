import { GpuProcessSchema, GpuSchema } from '../../runtime/internal.js';
import type { Gpu, GpuProcess } from '../../runtime/internal.js';
import type { ZodType } from 'zod';
import { CellError, optionalNumber, recordLines, requiredInteger, requiredNumber, requiredText, splitCells } from './csv-fields.js';
import { runTool } from './run-tool.js';

/**
 * GPU inventory via nvidia-smi. Only the nvidia-smi binary is run: nothing here loads CUDA
 * or NVML into the agent process, so discovery cannot grab a CUDA context, reserve GPU
 * memory, or crash the agent on a broken driver.
 */

/** `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`; the parser relies on this column order. */
export const GPU_QUERY_ARGS: readonly string[] = Object.freeze([
  '--query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu',
  '--format=csv,noheader,nounits',
]);

/** `nvidia-smi --query-compute-apps=... --format=csv,noheader,nounits`; column order matters here too. */
export const APPS_QUERY_ARGS: readonly string[] = Object.freeze([
  '--query-compute-apps=gpu_uuid,pid,used_memory',
  '--format=csv,noheader,nounits',
]);

export interface NvidiaSmiOptions {
  /** Executable to run instead of `nvidia-smi` from PATH (tests point this at a fake script). */
  command?: string;
  /** Kill nvidia-smi after this long; a hung driver can make it block indefinitely. */
  timeoutMs?: number;
}

export const DEFAULT_NVIDIA_SMI = 'nvidia-smi';
export const DEFAULT_TIMEOUT_MS = 5000;

// Messages nvidia-smi prints instead of rows when there is nothing to list.
const NO_DEVICES = /^No devices were found\.?$/i;
const NO_PROCESSES = /^No running (?:compute )?processes found\.?$/i;

const GPU_COLUMNS = 6;
const APP_COLUMNS = 3;

/** Parses `--query-gpu` output (GPU_QUERY_ARGS). Throws an Error naming the first bad line. */
export function parseGpuQuery(text: string): Gpu[] {
  const gpus: Gpu[] = [];
  for (const { lineNo, line } of recordLines(text)) {
    if (NO_DEVICES.test(line)) continue;
    gpus.push(parseRecord('--query-gpu', lineNo, line, () => gpuFromLine(line), GpuSchema));
  }
  return gpus;
}

/** Parses `--query-compute-apps` output (APPS_QUERY_ARGS). Throws an Error naming the first bad line. */
export function parseComputeApps(text: string): GpuProcess[] {
  const apps: GpuProcess[] = [];
  for (const { lineNo, line } of recordLines(text)) {
    if (NO_PROCESSES.test(line)) continue;
    apps.push(parseRecord('--query-compute-apps', lineNo, line, () => appFromLine(line), GpuProcessSchema));
  }
  return apps;
}

/** Lists the GPUs; [] when nvidia-smi is not installed (a CPU-only host). */
export async function queryGpus(opts: NvidiaSmiOptions = {}): Promise<Gpu[]> {
  const stdout = await runNvidiaSmi(GPU_QUERY_ARGS, opts);
  return stdout === null ? [] : parseGpuQuery(stdout);
}

/** Lists processes holding GPU memory; [] when nvidia-smi is not installed. */
export async function queryComputeApps(opts: NvidiaSmiOptions = {}): Promise<GpuProcess[]> {
  const stdout = await runNvidiaSmi(APPS_QUERY_ARGS, opts);
  return stdout === null ? [] : parseComputeApps(stdout);
}

function runNvidiaSmi(args: readonly string[], opts: NvidiaSmiOptions): Promise<string | null> {
  return runTool(opts.command ?? DEFAULT_NVIDIA_SMI, args, { timeoutMs: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS });
}

function gpuFromLine(line: string): Gpu {
  const raw = line.split(',');
  if (raw.length < GPU_COLUMNS) {
    throw new CellError(`expected ${GPU_COLUMNS} columns, got ${raw.length}`);
  }
  const cells = splitCells(line);
  // index and uuid lead and the three numbers trail, so whatever lies between is the name;
  // rejoining the raw pieces keeps a (hypothetical) comma inside a product name intact.
  const name = raw
    .slice(2, raw.length - 3)
    .join(',')
    .trim();
  const [index = '', uuid = ''] = cells;
  const [total = '', used = '', util = ''] = cells.slice(-3);
  return {
    index: requiredInteger(index, 'index'),
    uuid: requiredText(uuid, 'uuid'),
    name,
    // The scheduler sizes placements by total memory; a GPU without it cannot be offered.
    memoryTotalMiB: requiredNumber(total, 'memory.total'),
    memoryUsedMiB: optionalNumber(used, 'memory.used'),
    utilizationPct: optionalNumber(util, 'utilization.gpu'),
    simulated: false,
  };
}

function appFromLine(line: string): GpuProcess {
  const cells = splitCells(line);
  if (cells.length !== APP_COLUMNS) {
    throw new CellError(`expected ${APP_COLUMNS} columns, got ${cells.length}`);
  }
  const [uuid = '', pid = '', used = ''] = cells;
  return {
    gpuUuid: requiredText(uuid, 'gpu_uuid'),
    pid: requiredInteger(pid, 'pid'),
    // [N/A] is common here: Windows WDDM and some containers cannot attribute memory to a pid.
    usedMemoryMiB: optionalNumber(used, 'used_memory'),
  };
}

/**
 * Builds one record and checks it against the shared runtime schema, so a value the rest of
 * Troupe would reject (utilization 250, pid 0) fails here, with the line that produced it.
 */
function parseRecord<T>(query: string, lineNo: number, line: string, build: () => T, schema: ZodType<T>): T {
  let reason: string;
  try {
    const checked = schema.safeParse(build());
    if (checked.success) return checked.data;
    reason = checked.error.issues.map((i) => `${i.path.map(String).join('.')}: ${i.message}`).join('; ');
  } catch (err) {
    if (!(err instanceof CellError)) throw err;
    reason = err.message;
  }
  const shown = line.length > 200 ? `${line.slice(0, 200)}…` : line;
  throw new Error(`nvidia-smi ${query} output line ${lineNo} could not be parsed (${reason}): ${JSON.stringify(shown)}`);
}
