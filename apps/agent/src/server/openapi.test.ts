import { createConfig, lintFromString } from '@redocly/openapi-core';
import { describe, expect, it } from 'vitest';
import { MCP_ROUTES } from './mcp-route.js';
import { openApiDocument, ROUTES } from './openapi.js';

// The document is linted with Redocly's recommended ruleset (a standard OpenAPI linter, run offline on the
// generated JSON); hosted-app.test.ts checks that every route answers with a body its schema accepts.

interface JsonSchema {
  required?: string[];
  additionalProperties?: boolean;
  properties?: Record<string, unknown>;
}

describe('the OpenAPI document', () => {
  it('passes the Redocly recommended ruleset with no error and no warning', async () => {
    const config = await createConfig({ extends: ['recommended'] });
    const problems = await lintFromString({
      source: JSON.stringify(openApiDocument()),
      absoluteRef: 'openapi.json',
      config,
    });
    // One justified exception: the open operational routes (health, readiness, metrics, this document) take no
    // input and no key, so they have no 4xx answer to document.
    const openOps = new Set(
      ROUTES.filter((r) => r.open).map(
        (r) => `#/paths/${r.path.replaceAll('/', '~1')}/${r.method}/responses`,
      ),
    );
    const excused = (p: (typeof problems)[number]) =>
      p.ruleId === 'operation-4xx-response' && openOps.has(p.location[0]?.pointer ?? '');
    expect(problems.filter(excused)).toHaveLength(openOps.size);
    expect(
      problems
        .filter((p) => !excused(p))
        .map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`),
    ).toEqual([]);
  });

  it('has an operation id, a summary and a 2xx response with a schema or a content type (or declared empty) for every route', () => {
    const doc = openApiDocument() as { paths: Record<string, Record<string, Record<string, unknown>>> };
    const ids = new Set<string>();
    for (const route of ROUTES) {
      const op = doc.paths[route.path]?.[route.method];
      expect(op, `${route.method} ${route.path}`).toBeDefined();
      expect(op?.operationId).toBe(route.operationId);
      ids.add(route.operationId);
      const ok = Object.entries(route.responses).filter(([status]) => status.startsWith('2'));
      expect(ok.length, route.operationId).toBeGreaterThan(0);
      for (const [, response] of ok)
        expect(response.schema ?? response.contentType ?? response.empty, route.operationId).toBeDefined();
    }
    expect(ids.size).toBe(ROUTES.length);
  });

  it('is generated from the request schemas the routes parse with', () => {
    const doc = openApiDocument() as {
      paths: Record<
        string,
        Record<string, { requestBody?: { content: Record<string, { schema: JsonSchema }> } }>
      >;
    };
    const turn = doc.paths['/v1/sessions/{id}/turns']?.post?.requestBody?.content['application/json']?.schema;
    expect(turn?.required).toEqual(['prompt']);
    expect(turn?.additionalProperties).toBe(false);
    expect(turn?.properties?.prompt).toMatchObject({ type: 'string', minLength: 1, maxLength: 200_000 });
  });

  it('covers the routes mounted beside /v1/sessions: /mcp (every method) and the Memory Stores API', () => {
    const doc = openApiDocument() as { paths: Record<string, Record<string, unknown>> };
    for (const route of MCP_ROUTES)
      expect(
        doc.paths[route.path]?.[route.method.toLowerCase()],
        `${route.method} ${route.path}`,
      ).toBeDefined();
    const stores = Object.entries(doc.paths)
      .filter(([path]) => path.startsWith('/v1/memory_stores'))
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`));
    // The methods and paths the SDK's client.beta.memoryStores (and Claude Code 2.1.x) call.
    expect(stores.sort()).toEqual(
      [
        'post /v1/memory_stores',
        'get /v1/memory_stores',
        'get /v1/memory_stores/{memory_store_id}',
        'post /v1/memory_stores/{memory_store_id}',
        'delete /v1/memory_stores/{memory_store_id}',
        'post /v1/memory_stores/{memory_store_id}/archive',
        'post /v1/memory_stores/{memory_store_id}/memories',
        'get /v1/memory_stores/{memory_store_id}/memories',
        'get /v1/memory_stores/{memory_store_id}/memories/export',
        'get /v1/memory_stores/{memory_store_id}/memories/{memory_id}',
        'post /v1/memory_stores/{memory_store_id}/memories/{memory_id}',
        'delete /v1/memory_stores/{memory_store_id}/memories/{memory_id}',
        'get /v1/memory_stores/{memory_store_id}/memory_versions',
        'get /v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}',
        'post /v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}/redact',
      ].sort(),
    );
  });
});
