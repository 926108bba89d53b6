import { MODEL_VERSION, TroupeError } from '../../runtime/internal.js';
import type { Params } from '../../runtime/internal.js';
import { repositoryIndex } from '../control/model-repository.js';
import { serverReadiness } from '../control/readiness.js';
import { EXTENSIONS, modelMetadata, modelReadiness } from '../http/oip-models.js';
import { TROUPE_VERSION } from '../http/openapi.js';
import { tritonConfigOf, tritonStatsOf } from '../http/triton-config.js';
import type { GrpcContext } from './context.js';
import { ModelRequestSchema, RepositoryIndexRequestSchema } from './messages.js';
import { parseMessage } from './status.js';

/**
 * The methods that describe the server and its models, each the same answer as its HTTP route
 * (head/http/oip-models.ts, triton-config.ts, model-repository.ts). Readiness is a field here, not
 * a status: a model nothing answers to is not ready (as Triton's ModelReady says), not an error.
 */

function paramsOf(message: unknown, what: string): Params {
  const { name, version } = parseMessage(ModelRequestSchema, message, what);
  return { name, ...(version ? { version } : {}) };
}

export function modelHandlers(ctx: GrpcContext): Record<string, (request: unknown) => unknown> {
  const { state, graphs } = ctx;
  return {
    ServerLive: () => ({ live: true }),
    ServerReady: () => ({ ready: serverReadiness(state, ctx.gate.draining).ready }),
    ServerMetadata: () => ({ name: 'troupe', version: TROUPE_VERSION, extensions: EXTENSIONS }),
    ModelReady: async (request) => ({ ready: (await modelReadiness(state, graphs, paramsOf(request, 'ModelReadyRequest'))) === 'ready' }),
    ModelMetadata: (request) => modelMetadata(state, graphs, paramsOf(request, 'ModelMetadataRequest')),
    ModelConfig: async (request) => ({ config: await tritonConfigOf(state, graphs, paramsOf(request, 'ModelConfigRequest')) }),
    ModelStatistics: async (request) => {
      const params = paramsOf(request, 'ModelStatisticsRequest');
      // No name: every model (as Triton answers), sorted as the HTTP route sorts them.
      if (params.name === '') {
        if (params.version !== undefined && params.version !== MODEL_VERSION)
          throw new TroupeError(
            'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
            `no model has version '${params.version.slice(0, 40)}' (versions: ${MODEL_VERSION})`,
          );
        const all = [...state.deployments.values()].sort((a, b) => a.spec.name.localeCompare(b.spec.name));
        return { model_stats: all.map((d) => d.stats.triton(d.spec.name)) };
      }
      return { model_stats: await tritonStatsOf(state, params) };
    },
    RepositoryIndex: async (request) => {
      const { ready } = parseMessage(RepositoryIndexRequestSchema, request, 'RepositoryIndexRequest');
      return { models: await repositoryIndex(state, graphs.views(), ready) };
    },
  };
}
