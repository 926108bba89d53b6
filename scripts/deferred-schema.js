// Part of the client bundle (scripts/bundle-client.mjs puts each top-level zod schema of the
// client's modules behind this): a schema built the first time anything touches it, so that
// importing @troupe/client builds none of the SDK's ~1,100 (zod 4 builds each eagerly, which was
// most of an import's time), and a program builds those it uses, once each.
//
// The stand-in forwards every operation to the schema, whose own methods and internals then act
// on the schema itself (`parse`, `_zod`, `instanceof z.ZodObject`, `.extend(…)`), so code written
// against the schema works against the stand-in. It is not the schema's identity, which nothing
// in the client's modules needs: none compares schemas, keys a registry by one (zod's metadata,
// .describe(), .meta()) or writes one as JSON Schema.

/** @template T @param {() => T} build @returns {T} */
export function deferredSchema(build) {
  let schema;
  const real = () => {
    if (schema === undefined) {
      const built = build();
      if (built === null || typeof built !== 'object' || !('_zod' in built)) {
        throw new TypeError('a deferred declaration of the client bundle did not build a zod schema (scripts/bundle-client.mjs)');
      }
      schema = built;
    }
    return schema;
  };
  return new Proxy(
    {},
    {
      get: (_, key) => Reflect.get(real(), key, real()),
      set: (_, key, value) => Reflect.set(real(), key, value, real()),
      has: (_, key) => Reflect.has(real(), key),
      getPrototypeOf: () => Reflect.getPrototypeOf(real()),
      defineProperty: (_, key, descriptor) => Reflect.defineProperty(real(), key, descriptor),
      deleteProperty: (_, key) => Reflect.deleteProperty(real(), key),
    },
  );
}
