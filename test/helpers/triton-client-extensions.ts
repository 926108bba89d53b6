import { rapidjsonDumps } from './triton-client.js';
import type { PyValue } from './triton-client.js';

/**
 * The requests tritonclient.http's InferenceServerClient sends for Triton's extensions, rebuilt
 * from its sources (src/python/library/tritonclient/http/_client.py) as triton-client.ts does for
 * inference: the method, the URI (`quote(model_name)`), and the body exactly as `_post` passes it
 * (rapidjson.dumps of what the method builds, or ""). geventhttpclient adds no Content-Type; headers
 * are the caller's (`headers=`).
 */
export interface TritonRequest {
  method: 'GET' | 'POST';
  path: string;
  body?: string;
}

const quoted = (model: string) => encodeURIComponent(model);

/** `get_model_config(model_name, model_version="")`. */
export function getModelConfig(model: string, version = ''): TritonRequest {
  return { method: 'GET', path: version ? `/v2/models/${quoted(model)}/versions/${version}/config` : `/v2/models/${quoted(model)}/config` };
}

/** `get_inference_statistics(model_name="", model_version="")`. */
export function getInferenceStatistics(model = '', version = ''): TritonRequest {
  if (!model) return { method: 'GET', path: '/v2/models/stats' };
  return { method: 'GET', path: version ? `/v2/models/${quoted(model)}/versions/${version}/stats` : `/v2/models/${quoted(model)}/stats` };
}

/** `get_model_repository_index()`: a POST with `request_body=""`. */
export function getModelRepositoryIndex(): TritonRequest {
  return { method: 'POST', path: '/v2/repository/index', body: '' };
}

/** `load_model(model_name, config=None, files=None)`: `json.dumps(load_request)` (rapidjson's), `{}` without a config. */
export function loadModel(model: string, config?: string): TritonRequest {
  const request: PyValue = config === undefined ? {} : { parameters: { config } };
  return { method: 'POST', path: `/v2/repository/models/${quoted(model)}/load`, body: rapidjsonDumps(request) };
}

/** `unload_model(model_name, unload_dependents=False)`. */
export function unloadModel(model: string, unloadDependents = false): TritonRequest {
  return {
    method: 'POST',
    path: `/v2/repository/models/${quoted(model)}/unload`,
    body: rapidjsonDumps({ parameters: { unload_dependents: unloadDependents } }),
  };
}
