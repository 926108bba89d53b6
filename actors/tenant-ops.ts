import type { HeadToActor, TenantReply } from '../runtime/internal.js';
import type { ModelSet } from './model-set.js';

type TenantMessage = Extract<HeadToActor, { type: 'tenant' }>;

/**
 * A multiplexed replica's answer to the head's questions about the models of its set (the
 * repository index and per-model load and unload, readiness and metadata of `deployment:model`).
 * Errors name the model, never a path (ModelSet words them so).
 */
export async function answerTenant(set: ModelSet, message: TenantMessage): Promise<TenantReply> {
  const { op, model } = message;
  if (op === 'scan') return { tenants: set.catalog(model) };
  if (model === undefined) return { tenants: [] };
  switch (op) {
    case 'describe':
      return { metadata: await set.describe(model) };
    case 'load':
      await set.pin(model);
      return { tenants: set.catalog(model) };
    case 'unload':
      set.unpin(model);
      return { tenants: set.catalog(model) };
  }
}
