/**
 * A count and its noun, as a person writes them: "1 model", "2 models", "0 calls". Messages and
 * views that print counts use this rather than "1 models" or "model(s)".
 */
export function plural(count: number, noun: string, nouns = `${noun}s`): string {
  return `${count.toLocaleString('en-US')} ${count === 1 ? noun : nouns}`;
}
