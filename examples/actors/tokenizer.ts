/**
 * A class actor for the README: a word tokenizer that holds its vocabulary as state. `troupe up`
 * offers it as module `actors/tokenizer.js`.
 */
export class Tokenizer {
  readonly #ids = new Map<string, number>();
  readonly #words: string[] = [];

  /** `vocab`: the known words; id 0 stands for any other. */
  constructor(vocab: string[]) {
    this.#words.push('<unk>', ...vocab);
    vocab.forEach((word, i) => this.#ids.set(word, i + 1));
  }

  encode(text: string): number[] {
    return text
      .split(/\s+/)
      .filter(Boolean)
      .map((w) => this.#ids.get(w) ?? 0);
  }

  decode(ids: number[]): string {
    return ids.map((id) => this.#words[id] ?? '<unk>').join(' ');
  }

  /** Streams the words of `text` back one at a time, as a generator of tokens would. */
  async *words(text: string): AsyncGenerator<string> {
    for (const id of this.encode(text)) yield this.#words[id]!;
  }
}
