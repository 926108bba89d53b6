/** Whether `done` resolves true within `ms` (false once they pass). */
export async function settledWithin(done: Promise<boolean>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(resolve, ms, false)));
  try {
    return await Promise.race([done, late]);
  } finally {
    clearTimeout(timer);
  }
}
