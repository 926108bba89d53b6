/**
 * The generate extension's method on a class actor (docs/http-api.md): `generate(inputs,
 * parameters)` gets the request's named inputs and its parameters, and as an async generator
 * answers once per item (here: the words of `text_input`, at most `max_tokens`). `troupe up`
 * offers it as module `actors/words.js`.
 */
export class Words {
  async *generate(inputs: { text_input?: unknown }, parameters: { max_tokens?: number }): AsyncGenerator<{ text_output: string }> {
    const words = String(inputs.text_input ?? '')
      .split(/\s+/)
      .filter(Boolean);
    for (const word of words.slice(0, parameters.max_tokens ?? words.length)) yield { text_output: word };
  }
}
