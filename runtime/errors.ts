/**
 * The one registry of error codes. Codes are stable API: callers match on `code`, never on
 * message text, and a code is never reused for another meaning. `docs/errors.md` lists the
 * same table; test/unit/errors.test.ts keeps the two in step.
 */
export const ERRORS = {
  TROUPE_ERR_BAD_FRAME: { status: 400, retryable: false, what: 'A frame is not valid msgpack, is text, is empty, or is too large.' },
  TROUPE_ERR_BAD_MESSAGE: { status: 400, retryable: false, what: 'A decoded message does not match the protocol schema.' },
  TROUPE_ERR_BAD_TENSOR: {
    status: 400,
    retryable: false,
    what: 'A tensor is malformed: unknown dtype, bad shape, or data length that contradicts its shape.',
  },
  TROUPE_ERR_BAD_INPUT: {
    status: 400,
    retryable: false,
    what: 'Inputs do not fit the model: unknown or missing input name, wrong dtype or shape.',
  },
  TROUPE_ERR_BAD_SPEC: { status: 400, retryable: false, what: 'A deployment or graph spec is invalid.' },
  TROUPE_ERR_BAD_FLAG: { status: 400, retryable: false, what: 'A command-line flag or environment variable is invalid.' },
  TROUPE_ERR_BAD_TLS: {
    status: 400,
    retryable: false,
    what: 'A TLS certificate, key or CA cannot be used: the file is missing or holds no PEM, or the key does not match its certificate.',
  },
  TROUPE_ERR_MODEL_PATH: { status: 400, retryable: false, what: "A model path is missing or escapes the agent's model directory." },
  TROUPE_ERR_MODEL_LOAD: { status: 422, retryable: false, what: 'onnxruntime could not load the model or run its warm-up inference.' },
  TROUPE_ERR_MODEL_TOO_LARGE: {
    status: 422,
    retryable: false,
    what: "A multiplexed deployment's model is larger than its maxModelMemory.",
  },
  TROUPE_ERR_UNAUTHORIZED: { status: 401, retryable: false, what: 'The cluster token is missing or wrong.' },
  TROUPE_ERR_UNKNOWN_DEPLOYMENT: { status: 404, retryable: false, what: 'No deployment has that name.' },
  TROUPE_ERR_NOT_READY: { status: 503, retryable: true, what: 'The deployment exists but has no READY replica yet.' },
  TROUPE_ERR_OVERLOADED: { status: 429, retryable: true, what: "The deployment's queue is full; retry later." },
  TROUPE_ERR_DEADLINE_EXCEEDED: { status: 504, retryable: true, what: 'The call did not finish before its deadline.' },
  TROUPE_ERR_ACTOR_DIED: { status: 503, retryable: true, what: 'The actor running the call exited before answering.' },
  TROUPE_ERR_CONNECTION_CLOSED: { status: 503, retryable: true, what: 'The connection closed before the answer arrived.' },
  TROUPE_ERR_CLIENT_CLOSED: {
    status: 400,
    retryable: false,
    what: 'The SDK client was closed (close()): calls made with it after that fail; connect() again.',
  },
  TROUPE_ERR_SHUTTING_DOWN: { status: 503, retryable: true, what: 'The process is shutting down and takes no new work.' },
  TROUPE_ERR_INFERENCE: { status: 500, retryable: false, what: 'onnxruntime failed while running the model.' },
  TROUPE_ERR_INTERNAL: { status: 500, retryable: false, what: 'An unexpected internal error; the message says where.' },
  TROUPE_ERR_BAD_REQUEST: {
    status: 400,
    retryable: false,
    what: 'An HTTP request is malformed: its body is not valid JSON or YAML, a header is wrong, or a field does not fit the endpoint.',
  },
  TROUPE_ERR_NOT_FOUND: { status: 404, retryable: false, what: 'No HTTP endpoint has that path.' },
  TROUPE_ERR_UNKNOWN_MODEL: { status: 404, retryable: false, what: 'No uploaded model has that name (or that sha256).' },
  TROUPE_ERR_BODY_TOO_LARGE: {
    status: 413,
    retryable: false,
    what: 'An HTTP request body is larger than the head accepts (--max-body-mib, --max-model-mib).',
  },
  TROUPE_ERR_BAD_MODEL_FILE: { status: 422, retryable: false, what: 'An uploaded file is not a valid ONNX model.' },
  TROUPE_ERR_MODEL_FETCH: {
    status: 502,
    retryable: true,
    what: "An agent could not fetch an uploaded model from the head, or the bytes it got do not match the model's sha256.",
  },
  TROUPE_ERR_UNKNOWN_RUN: {
    status: 404,
    retryable: false,
    what: 'A future passed as an input names a run the head does not hold: never seen, or dropped from its result cache.',
  },
  TROUPE_ERR_FN_FAILED: { status: 500, retryable: false, what: 'A fn step threw, or returned something other than a map of tensors.' },
  TROUPE_ERR_UNKNOWN_JOB: {
    status: 404,
    retryable: false,
    what: 'No async job has that id: never created, or dropped after its retention time or to make room for newer ones.',
  },
  TROUPE_ERR_RESULT_TOO_LARGE: {
    status: 507,
    retryable: false,
    what: "An async job's result is larger than the head keeps for jobs (--max-job-mib).",
  },
  TROUPE_ERR_SHARED_MEMORY: {
    status: 400,
    retryable: false,
    what: 'An actor cannot map a shared-memory region a client offered (another host, not a sealed memfd, too small, or the actor lacks the addon), or a call names bytes outside the regions it mapped; the client then sends tensors in frames.',
  },
  TROUPE_ERR_NODE_NAME_TAKEN: {
    status: 409,
    retryable: true,
    what: 'An agent registered under a node name that a connected, healthy agent already has.',
  },
  TROUPE_ERR_DEPLOY_TIMEOUT: {
    status: 504,
    retryable: true,
    what: "A deploy's wait for READY passed its bound (default 60 s, unless timeoutMs or ?timeoutS says otherwise); the message names each actor not READY and why. The deployment stays and the head keeps placing it; HTTP answers 202 with the same reasons instead.",
  },
  TROUPE_ERR_DATA_DIR_LOCKED: {
    status: 409,
    retryable: false,
    what: "Another head, still running, holds the data directory's lock (`<dataDir>/head.lock`, its pid inside); the message names that pid and the directory. A lock whose pid is gone is taken over.",
  },
  TROUPE_ERR_STATE_UNREADABLE: {
    status: 500,
    retryable: false,
    what: "The head's state file (`<dataDir>/state.json`) exists but cannot be read as one: truncated, empty, not JSON, of another schema or a newer format, or not a regular file. The head does not start (starting empty would lose every deployment and refuse the running actors); the message names the file, the copy kept before the last write (`state.json.prev`), and `--discard-state`, which sets the file aside and starts empty.",
  },
  TROUPE_ERR_MODEL_IN_USE: {
    status: 409,
    retryable: false,
    what: 'An uploaded model cannot be deleted while a deployment uses it; the message names the deployments.',
  },
  TROUPE_ERR_NO_MODULE_DIR: {
    status: 400,
    retryable: false,
    what: 'A fn step was deployed to an agent started without --module-dir: fn steps are opt-in code, and such an agent runs none.',
  },
  TROUPE_ERR_SPEC_TOO_LARGE: {
    status: 413,
    retryable: false,
    what: 'A deployment body is larger or more complex than a spec needs (at most 256 KiB, and YAML of at most 2,000 lines and flow items); the message names the bound. Specs are a few KB; the bounds keep parsing off the critical path of serving.',
  },
  TROUPE_ERR_TOO_MANY_ELEMENTS: {
    status: 413,
    retryable: false,
    what: 'An inference request declares or carries more tensor elements than the head accepts per request (16M), or its JSON "data" holds more than 4M values (send larger tensors as binary data); refused before the JSON is parsed.',
  },
  TROUPE_ERR_UNSUPPORTED_ENCODING: {
    status: 415,
    retryable: false,
    what: "An HTTP request body's Content-Encoding is not one the head decodes (gzip, deflate, identity); the answer's Accept-Encoding lists those.",
  },
  TROUPE_ERR_DEPLOYMENT_EXISTS: {
    status: 409,
    retryable: false,
    what: 'A deploy names a READY deployment whose spec differs, without saying it replaces it; the message lists what differs. The SDK replaces with `deploy(spec, { replace: true })` or `update(spec)`; HTTP PUT is declarative and always replaces (its answer says `replaced`).',
  },
  TROUPE_ERR_DEPLOYMENT_IN_USE: {
    status: 409,
    retryable: false,
    what: 'A deployment that a graph calls cannot be deleted while the graph is deployed; the message names the graphs. Delete them first, or force it (`?force=true`, `undeploy(name, { force: true })`, `troupe delete --force`): the graphs then fail until it is deployed again.',
  },
  TROUPE_ERR_NOT_A_CLASS_ACTOR: {
    status: 400,
    retryable: false,
    what: 'A method call names a deployment that is a model, fn or graph, not a class actor (`cluster.actor`, `kind: "class"`).',
  },
  TROUPE_ERR_UNKNOWN_METHOD: {
    status: 404,
    retryable: false,
    what: "A class actor has no public method of that name (names starting with '_', the constructor, restore, checkpoint and stateSize are not callable); the message lists the methods it has.",
  },
  TROUPE_ERR_METHOD_FAILED: {
    status: 500,
    retryable: false,
    what: "A class actor's method threw, or returned a value that cannot be sent (not msgpack-encodable, or larger than a frame); the message carries the method's error.",
  },
  TROUPE_ERR_CHECKPOINT_FAILED: {
    status: 500,
    retryable: false,
    what: "A class actor's method ran, but its checkpoint() threw or returned something that cannot be kept; the instance's state changed, and a restart would restore the checkpoint before this call.",
  },
  TROUPE_ERR_UNKNOWN_CALL: {
    status: 404,
    retryable: false,
    what: 'A Future passed as a method argument names an actor call the head does not hold (never made, from another head, or older than 60 s, past 10,000 calls or past 64 MiB of results).',
  },
  TROUPE_ERR_METHOD_NOT_ALLOWED: {
    status: 405,
    retryable: false,
    what: 'The HTTP endpoint exists but not with that method; the Allow header names the methods it takes.',
  },
  TROUPE_ERR_UNSENDABLE_VALUE: {
    status: 400,
    retryable: false,
    what: 'A value cannot cross between processes (a function, symbol, class instance, Error, Promise, an array with holes, a key named __proto__, a string with an unpaired surrogate, or nesting past 64 levels); the message names where it is and what it is. Nothing was sent.',
  },
  TROUPE_ERR_TOO_LARGE: {
    status: 413,
    retryable: false,
    what: 'A message (a call, its answer, a stream item) is larger than one frame may be; the message names its size and the limit. Nothing was sent: split the work (smaller inputs, a data-parallel graph) or send it in parts.',
  },
  TROUPE_ERR_ACTOR_DEAD: {
    status: 410,
    retryable: false,
    what: "Every replica or instance of the deployment is DEAD (it crashed past its restarts, or could not start); the message gives each one's cause. Deploy it again.",
  },
  TROUPE_ERR_CANCELLED: {
    status: 499,
    retryable: false,
    what: "The caller cancelled the call (future.cancel(), an aborted signal, or a closed HTTP request): a queued call never ran; a running one was asked to stop through its context's signal, and what it changed before it stopped stays.",
  },
  TROUPE_ERR_DEADLOCK: {
    status: 409,
    retryable: false,
    what: 'A class actor with maxConcurrency 1 (or a concurrency group whose maxConcurrency is 1) called its own instance, into that group, while running a call in it: the new call would wait behind the one making it forever; the message names the cycle and the group. Call the method directly (this.method()), or raise that limit above 1.',
  },
  TROUPE_ERR_STATE_LOST: {
    status: 410,
    retryable: false,
    what: 'A class instance lost the state this caller (or its session) saw it hold: it restarted with no checkpoint to restore, or it is DEAD or gone; the call did not run, and the next call runs on the instance as it is now.',
  },
} as const satisfies Record<string, { status: number; retryable: boolean; what: string }>;

export type ErrorCode = keyof typeof ERRORS;

export const ERROR_CODES = Object.keys(ERRORS) as ErrorCode[];

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERRORS, value);
}

/** Marks every TroupeError, whichever build of this module made it (see `Symbol.hasInstance` below). */
const BRAND = Symbol.for('troupe.TroupeError');

/**
 * The error every Troupe process throws and sends. It crosses process boundaries as
 * `{ code, message }` ({@link toWireError}) and is rebuilt on the other side.
 *
 * @example
 * try { await cluster.run('mlp', inputs); }
 * catch (err) { if (err instanceof TroupeError && err.retryable) retryLater(); }
 */
export class TroupeError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TroupeError';
    this.code = code;
    Object.defineProperty(this, BRAND, { value: true });
  }

  /**
   * `err instanceof TroupeError` holds for errors of either build of this module: the client
   * package's (what a user's code imports from 'troupe' or '@troupe/client') and the server's own
   * (runtime/internal.ts), which meet in one process where a class actor's method throws one.
   * Subclasses keep the ordinary prototype check.
   */
  static [Symbol.hasInstance](value: unknown): boolean {
    if (this !== TroupeError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
  }

  get status(): number {
    return ERRORS[this.code].status;
  }

  get retryable(): boolean {
    return ERRORS[this.code].retryable;
  }
}

export interface WireError {
  code: ErrorCode;
  message: string;
}

/** Any thrown value as a wire error; unknown errors become TROUPE_ERR_INTERNAL with their text. */
export function toWireError(err: unknown): WireError {
  if (err instanceof TroupeError) return { code: err.code, message: err.message };
  const message = err instanceof Error ? err.message : String(err);
  return { code: 'TROUPE_ERR_INTERNAL', message };
}

export function fromWireError(wire: WireError): TroupeError {
  return new TroupeError(wire.code, wire.message);
}
