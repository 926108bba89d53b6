import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, test } from 'node:test';
import { CHAR_VOCAB, buildCharRnn, charText, charTokens } from '../../models/index.js';
import { disableOrtTelemetryByDefault } from '../../runtime/internal.js';
import { greedyTokens } from '../helpers/char-rnn-greedy.js';

disableOrtTelemetryByDefault();

// The first 16 hex digits of the default model's sha256: a change of weights, graph or encoding shows here.
const PINNED_SHA256 = 'de52f36dd64a25a0';

describe('the seeded character-level step model (models/char-rnn.ts)', () => {
  test('the same seed gives the same bytes, pinned; another seed other weights', () => {
    const a = buildCharRnn();
    assert.deepEqual(buildCharRnn().bytes, a.bytes);
    // Weights are drawn with uniform draws and sqrt only (models/random.ts): the same bytes on every machine.
    assert.equal(createHash('sha256').update(a.bytes).digest('hex').slice(0, 16), PINNED_SHA256);
    assert.notDeepEqual(buildCharRnn({ seed: 2 }).bytes, a.bytes);
    assert.equal(a.hidden, 128);
    assert.equal(a.vocab.length, 96);
  });

  test('greedy decoding is deterministic, moves (not one character over and over) and depends on the prompt', async () => {
    const { bytes, hidden } = buildCharRnn();
    const first = await greedyTokens(bytes, hidden, 'Once upon a time', 60);
    assert.deepEqual(await greedyTokens(bytes, hidden, 'Once upon a time', 60), first);
    assert.ok(new Set(first).size >= 10, `only ${new Set(first).size} distinct tokens: ${JSON.stringify(charText(first))}`);
    assert.notDeepEqual(await greedyTokens(bytes, hidden, 'Once upon a tide', 60), first);
    assert.ok(first.every((id) => id >= 0 && id < CHAR_VOCAB.length));
  });

  test('the vocabulary: "\\n" and printable ASCII, both ways; anything else is named', () => {
    const text = 'Hello, world!\n~ {}';
    assert.equal(charText(charTokens(text)), text);
    assert.deepEqual(charTokens('\n A'), [0, 1, 34]);
    assert.throws(() => charTokens('naïve'), /character U\+00EF at 2 is outside the vocabulary/);
    assert.throws(() => buildCharRnn({ hidden: 0 }), /hidden must be a whole number/);
  });
});
