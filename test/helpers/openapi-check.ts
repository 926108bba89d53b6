import SwaggerParser from '@apidevtools/swagger-parser';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv/dist/2020.js';

/**
 * Checks live answers against an OpenAPI 3.1 document: the document itself with
 * @apidevtools/swagger-parser (the OpenAPI specification's own JSON Schema, and its rules on paths
 * and parameters), and each answer's status, media type and body against what the document says
 * of that operation, with ajv's JSON Schema 2020-12 (the dialect of OpenAPI 3.1 schemas).
 */

interface MediaType {
  schema?: Record<string, unknown>;
}
interface Response {
  content?: Record<string, MediaType>;
  headers?: Record<string, unknown>;
}
interface Operation {
  responses: Record<string, Response>;
}
export type OpenApiDocument = { openapi: string; paths: Record<string, Record<string, Operation>> };

/** What an answer was: its status, its Content-Type (parameters and all), its body. */
export interface LiveAnswer {
  status: number;
  contentType: string | undefined;
  /** Inference-Header-Content-Length, for a binary inference answer. */
  headerLength?: number | undefined;
  body: Buffer;
}

/** Validates the document (a copy: swagger-parser dereferences in place). Throws with the validator's words. */
export async function validateDocument(doc: OpenApiDocument): Promise<void> {
  await SwaggerParser.validate(structuredClone(doc) as unknown as Parameters<typeof SwaggerParser.validate>[0]);
}

/** Every operation in the document, as "GET /v2/models/{name}". */
export function operationsOf(doc: OpenApiDocument): string[] {
  return Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`));
}

export class AnswerChecker {
  readonly #doc: OpenApiDocument;
  readonly #ajv = new Ajv2020({ strict: false, allErrors: true, logger: false, validateFormats: false });
  readonly #compiled = new Map<Record<string, unknown>, ValidateFunction>();

  constructor(doc: OpenApiDocument) {
    this.#doc = doc;
  }

  #validator(schema: Record<string, unknown>): ValidateFunction {
    let v = this.#compiled.get(schema);
    if (!v) this.#compiled.set(schema, (v = this.#ajv.compile(schema)));
    return v;
  }

  /**
   * The problems with `answer` as an answer of `operation` ("GET /v2/models/{name}"): a status the
   * document does not list (errors fall to `default`), a media type it does not name, or a body
   * its schema refuses. A binary inference answer's JSON part is checked against the JSON schema
   * of the same response. Empty when the answer is as documented.
   */
  problems(operation: string, answer: LiveAnswer): string[] {
    const [method, path] = operation.split(' ') as [string, string];
    const op = this.#doc.paths[path]?.[method.toLowerCase()];
    if (!op) return [`${operation} is not in the document`];
    const documented = op.responses[String(answer.status)];
    const response = documented ?? (answer.status >= 400 ? op.responses.default : undefined);
    if (!response) return [`${operation} answered ${answer.status}, which the document does not list`];
    const content = response.content;
    if (!content)
      return answer.body.length === 0 ? [] : [`${operation} ${answer.status}: documented without a body, got ${answer.body.length} bytes`];
    const type = (answer.contentType ?? '').split(';')[0]!.trim().toLowerCase();
    const media = content[type];
    if (!media) return [`${operation} ${answer.status}: media type '${type}' is not documented (${Object.keys(content).join(', ')})`];
    let json: unknown;
    if (type === 'application/json' || (type === 'application/octet-stream' && answer.headerLength !== undefined)) {
      const bytes = type === 'application/json' ? answer.body : answer.body.subarray(0, answer.headerLength);
      const schema = type === 'application/json' ? media.schema : content['application/json']?.schema;
      if (!schema) return [`${operation} ${answer.status}: no JSON schema for the JSON part`];
      try {
        json = JSON.parse(bytes.toString('utf8'));
      } catch {
        return [`${operation} ${answer.status}: the body is not JSON`];
      }
      const validate = this.#validator(schema);
      if (validate(json)) return [];
      return (validate.errors ?? []).map(
        (e) => `${operation} ${answer.status}: ${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`,
      );
    }
    // Text and bytes: the schema says only "a string"; the media type was the check.
    return [];
  }
}
