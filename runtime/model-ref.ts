/**
 * A reference to a model uploaded to the head (`PUT /api/v1/models/{name}`), as a deployment's
 * `model` carries it to the agents: `head:<name>@sha256:<hex>`. The hash, not the name, says which
 * bytes to run, so re-uploading a name never changes what a running deployment serves, and an
 * agent can check what it fetched. Any other `model` string is a path under the agent's
 * `--model-dir`.
 */
export interface ModelRef {
  name: string;
  sha256: string;
}

const REF = /^head:([A-Za-z0-9][A-Za-z0-9._-]{0,62})@sha256:([0-9a-f]{64})$/;

export const SHA256_HEX = /^[0-9a-f]{64}$/;

export function formatModelRef(ref: ModelRef): string {
  return `head:${ref.name}@sha256:${ref.sha256}`;
}

/** The reference a `model` string holds, or undefined when it is a path. */
export function parseModelRef(model: string): ModelRef | undefined {
  const match = REF.exec(model);
  return match ? { name: match[1]!, sha256: match[2]! } : undefined;
}

/** Where an agent fetches an uploaded model's bytes: `GET <head>/api/v1/blobs/<sha256>`. */
export function blobUrl(headUrl: string, sha256: string): URL {
  const base = new URL(headUrl);
  base.protocol = base.protocol === 'wss:' ? 'https:' : base.protocol === 'ws:' ? 'http:' : base.protocol;
  return new URL(`/api/v1/blobs/${sha256}`, base);
}
