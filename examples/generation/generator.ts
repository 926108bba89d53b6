/**
 * Autoregressive generation with a stateful class actor (docs/generation.md): each instance loads
 * a character-level recurrent step model once, keeps each session's recurrent state between
 * calls, and streams the text it generates one character (token) per step, greedily. `troupe up`
 * offers it as module `generation/generator.js`.
 *
 * The model by default is models/char-rnn.ts built from a seed: untrained, so its text means
 * nothing, but it is the same on every machine, which is what lets a test compare the stream with
 * onnxruntime run in-process step by step.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { CHAR_VOCAB, buildCharRnn, charTokens } from '../../models/char-rnn.js';
import { SessionStore } from './sessions.js';
import type { Session, SessionInfo } from './sessions.js';
import { StepModel, stepModelShape } from './step-model.js';

const OptionsSchema = z
  .object({
    /** The seed of the built model (default 1). */
    seed: z.number().int().optional(),
    /** The width of the built model's state (default 128). */
    hidden: z.number().int().min(1).max(4096).optional(),
    /** Instead of building one: an ONNX file with the step contract (step-model.ts), as the actor's process sees the path. */
    modelPath: z.string().min(1).optional(),
    maxSessions: z.number().int().min(1).max(100_000).default(1024),
    idleMs: z
      .number()
      .int()
      .min(1)
      .default(10 * 60_000),
    /** Keep the sessions in checkpoints, so a restarted instance has them back (costs H×4 bytes a session per call). */
    checkpoints: z.boolean().default(false),
  })
  .strict();

const MAX_TOKENS = 4096;
const MAX_PROMPT = 16_384;
const SessionKey = z.string().min(1).max(256);

const GenerateSchema = z
  .object({
    prompt: z.string().max(MAX_PROMPT).optional(),
    /** The prompt under the name the inference protocol's generate extension gives it. */
    text_input: z.string().max(MAX_PROMPT).optional(),
    maxTokens: z.number().int().min(0).max(MAX_TOKENS).optional(),
    /** Carry this session on (or start it): its state stays on this instance for the next call. */
    session: SessionKey.optional(),
  })
  .strict()
  .refine((r) => r.prompt === undefined || r.text_input === undefined, 'give prompt or text_input, not both');

/** The generate extension's `parameters` (its second argument): this generator decodes greedily, so it takes only these. */
const ParametersSchema = z
  .object({ max_tokens: z.number().int().min(0).max(MAX_TOKENS).optional(), session: SessionKey.optional() })
  .strict();

const ContinueSchema = z
  .object({
    session: SessionKey,
    prompt: z.string().max(MAX_PROMPT).default(''),
    maxTokens: z.number().int().min(0).max(MAX_TOKENS).default(64),
  })
  .strict();

const EndSchema = z.object({ session: SessionKey }).strict();

/** What checkpoint() keeps: each session's pending token, steps and state bytes. */
const SavedSchema = z.object({
  hidden: z.number().int(),
  sessions: z.array(z.tuple([SessionKey, z.number().int().min(0), z.number().int().min(0), z.instanceof(Uint8Array)])),
});

/** The request `schema` allows, or an error naming what is wrong (the caller sees it as TROUPE_ERR_METHOD_FAILED). */
function parse<T extends z.ZodType>(schema: T, value: unknown, what: string): z.output<T> {
  const parsed = schema.safeParse(value ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${what}: ${issue?.path.join('.') || 'the request'}: ${issue?.message}`);
  }
  return parsed.data;
}

export class Generator {
  readonly #model: Promise<StepModel>;
  readonly #hidden: number;
  readonly #sessions: SessionStore;
  readonly #checkpoints: boolean;

  /**
   * Builds (or reads) the model and checks its shape now, so a wrong model fails the deploy; the
   * onnxruntime session loads in the background (a constructor cannot wait) and the first call waits for it.
   */
  constructor(options: unknown = {}) {
    const o = parse(OptionsSchema, options, 'new Generator(options)');
    const bytes =
      o.modelPath !== undefined
        ? readFileSync(o.modelPath)
        : buildCharRnn({ seed: o.seed ?? 1, ...(o.hidden && { hidden: o.hidden }) }).bytes;
    const shape = stepModelShape(bytes);
    this.#hidden = shape.hidden;
    this.#model = StepModel.load(bytes, shape);
    // Awaited by every call; this only keeps a failed load from being an unhandled rejection meanwhile.
    this.#model.catch(() => {});
    this.#sessions = new SessionStore({ maxSessions: o.maxSessions, idleMs: o.idleMs });
    this.#checkpoints = o.checkpoints;
  }

  /**
   * Streams up to `maxTokens` characters after `prompt`, one per step. With `session`, the text
   * carries on from where that session's last call left off (a new session starts fresh), and
   * the state after it stays here for the next call; without, it starts fresh and is forgotten.
   * The inference protocol's generate extension calls it as `generate({ text_input }, { max_tokens, session })`.
   */
  async *generate(request: unknown, parameters?: unknown): AsyncGenerator<string> {
    const r = parse(GenerateSchema, request, 'generate()');
    const p = parse(ParametersSchema, parameters, 'generate() parameters');
    const ids = charTokens(r.prompt ?? r.text_input ?? '');
    const maxTokens = p.max_tokens ?? r.maxTokens ?? 64;
    const session = p.session ?? r.session;
    const s = session !== undefined ? this.#sessions.open(session, () => this.#fresh()) : { ...this.#fresh(), usedAt: 0 };
    yield* this.#decode(s, ids, maxTokens);
  }

  /** Streams more of a session that exists: as `generate` with that session, but a forgotten session is an error, not a fresh start. */
  async *continue(request: unknown): AsyncGenerator<string> {
    const { session, prompt, maxTokens } = parse(ContinueSchema, request, 'continue()');
    const ids = charTokens(prompt);
    const s = this.#sessions.get(session);
    if (!s)
      throw new Error(`no session '${session}' on this instance (never started, ended, or forgotten after being idle or past the cap)`);
    yield* this.#decode(s, ids, maxTokens);
  }

  /** Forgets a session; whether there was one. */
  end(request: unknown): boolean {
    return this.#sessions.delete(parse(EndSchema, request, 'end()').session);
  }

  /** The sessions this instance holds, least recently used first. */
  sessions(): SessionInfo[] {
    return this.#sessions.list();
  }

  /** The sessions' state, when built with `checkpoints: true`; nothing otherwise. */
  checkpoint(): { hidden: number; sessions: [string, number, number, Uint8Array][] } | null {
    if (!this.#checkpoints) return null;
    return {
      hidden: this.#hidden,
      sessions: this.#sessions
        .entries()
        .map(([key, s]): [string, number, number, Uint8Array] => [
          key,
          s.pending,
          s.steps,
          new Uint8Array(s.state.buffer, s.state.byteOffset, s.state.byteLength),
        ]),
    };
  }

  restore(saved: unknown): void {
    if (saved === null || saved === undefined) return;
    const { hidden, sessions } = parse(SavedSchema, saved, 'restore()');
    if (hidden !== this.#hidden) throw new Error(`the checkpoint's state is ${hidden} wide; this model's is ${this.#hidden}`);
    for (const [key, pending, steps, bytes] of sessions) {
      if (bytes.byteLength !== hidden * 4 || pending >= CHAR_VOCAB.length)
        throw new Error(`the checkpoint of session '${key}' is malformed`);
      // A copy: the bytes may sit at an offset a Float32Array cannot start at.
      this.#sessions.put(key, { state: new Float32Array(new Uint8Array(bytes).buffer), pending, steps });
    }
  }

  stateSize(): number {
    return this.#sessions.size * this.#hidden * 4;
  }

  #fresh(): Omit<Session, 'usedAt'> {
    return { state: new Float32Array(this.#hidden), pending: 0, steps: 0 };
  }

  /**
   * Feeds the pending token and the prompt, then generates. The session is written only at each
   * yield, whole: a stream cancelled there (its reader left) leaves the session consistent, holding
   * every token yielded so far, including any the instance made ahead of a reader that never read them.
   */
  async *#decode(s: Session, prompt: number[], maxTokens: number): AsyncGenerator<string> {
    const model = await this.#model;
    let state = s.state;
    let next = s.pending;
    let steps = s.steps;
    for (const token of [s.pending, ...prompt]) {
      ({ next, state } = await model.step(token, state));
      steps++;
    }
    const save = () => Object.assign(s, { state, pending: next, steps });
    save();
    for (let i = 0; i < maxTokens; i++) {
      if (i > 0) {
        ({ next, state } = await model.step(next, state));
        steps++;
        save();
      }
      yield CHAR_VOCAB[next]!;
    }
  }
}
