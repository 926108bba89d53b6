/**
 * Seeded randomness for generated model weights.
 *
 * Weight initialisers deliberately use only uniform draws scaled by `Math.sqrt`: IEEE 754
 * requires `sqrt` (and + - * /) to be correctly rounded, so the same seed yields
 * byte-identical weights on every platform and Node version. `Math.log`/`Math.cos`
 * (needed for Gaussian draws) carry no such guarantee, so `normal()` is offered for test
 * inputs only, never for anything that ends up inside a model file.
 */

/** A mulberry32 generator: small, fast, 32-bit state, good enough for weight init. */
export class Rng {
  private state: number;

  /** @param seed any integer; only its low 32 bits matter. */
  constructor(seed: number) {
    if (!Number.isInteger(seed)) throw new RangeError(`seed must be an integer, got ${seed}`);
    this.state = seed >>> 0;
  }

  /** Next uint32. */
  nextUint32(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** Uniform float in [0, 1). */
  next(): number {
    return this.nextUint32() / 4294967296;
  }

  /** Uniform float in [lo, hi). */
  uniform(lo: number, hi: number): number {
    return lo + (hi - lo) * this.next();
  }

  /**
   * Standard normal draw (Box–Muller). Not bit-reproducible across platforms (see the
   * module comment); use it for test inputs, not for model weights.
   */
  normal(): number {
    // 1 - next() lies in (0, 1], so the log is finite.
    const u = 1 - this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /**
   * An independent child generator, so one part of a model can draw a varying number of
   * values without shifting the weights of every later part.
   */
  fork(): Rng {
    return new Rng(this.nextUint32());
  }
}

/** `count` values drawn uniformly from [-limit, limit). */
export function uniformArray(rng: Rng, count: number, limit: number): Float32Array {
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = rng.uniform(-limit, limit);
  return out;
}

/**
 * He (Kaiming) uniform init: variance 2/fanIn, which keeps activation scale roughly constant
 * through ReLU-like layers.
 */
export function heUniform(rng: Rng, count: number, fanIn: number): Float32Array {
  return uniformArray(rng, count, Math.sqrt(6 / fanIn));
}

/**
 * LeCun uniform init: variance 1/fanIn, for layers with no activation after them (linear
 * projections, classifiers), where He init would double the variance each time.
 */
export function lecunUniform(rng: Rng, count: number, fanIn: number): Float32Array {
  return uniformArray(rng, count, Math.sqrt(3 / fanIn));
}

/** Test-input helper: `count` standard-normal values (see `Rng.normal`). */
export function normalArray(rng: Rng, count: number): Float32Array {
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = rng.normal();
  return out;
}
