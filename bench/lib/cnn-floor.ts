import { measureFloorApart } from './floor.js';

/** The MobileNet-shaped CNN's input, at batch `b`. */
export const cnnInput = { name: 'image', shape: (b: number) => [b, 3, 224, 224] };

/** The layouts the CNN is served and floored in on this machine's cores: one process with both, or one per core. */
export const LAYOUTS = [
  { replicas: 1, threads: 2 },
  { replicas: 2, threads: 1 },
] as const;

export const layoutName = (l: { replicas: number; threads: number }) => `${l.replicas} x ${l.threads} thread${l.threads > 1 ? 's' : ''}`;

/** The better of the two raw layouts at `batch`, each in fresh processes (see measureFloorApart). */
export async function bestLayoutFloor(path: string, batch: number, seconds: number): Promise<{ rows: number[]; best: number }> {
  const rows: number[] = [];
  for (const l of LAYOUTS) rows.push((await measureFloorApart(path, cnnInput, batch, seconds, l.threads, l.replicas)).rowsPerSecond);
  return { rows, best: Math.max(...rows) };
}
