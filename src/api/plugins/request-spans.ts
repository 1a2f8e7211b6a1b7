/**
 * The API's server spans: one per HTTP request, parented on the caller's `traceparent` (src/core/tracing.ts has
 * the rest: outbound spans, gRPC server spans, and whether tracing is on at all).
 */
import { context, propagation, trace, SpanKind, SpanStatusCode, ROOT_CONTEXT, type Span } from '@opentelemetry/api';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { tracer, tracingEnabled } from '../../core/tracing';

declare module 'fastify' {
  interface FastifyRequest {
    span?: Span;
  }
}

/**
 * A server span per request, parented on the caller's `traceparent`. The span starts when the request
 * arrives, but becomes the active context only in preHandler: the body is read by socket events, which run
 * outside any context entered before it.
 */
export function traceRequests(app: FastifyInstance): void {
  if (!tracingEnabled()) return;
  app.addHook('onRequest', (req, _reply, done) => {
    const parent = propagation.extract(ROOT_CONTEXT, req.headers);
    req.span = tracer.startSpan(
      `${req.method} ${routeOf(req)}`,
      { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method, 'http.route': routeOf(req), 'url.path': req.url.split('?')[0] } },
      parent,
    );
    done();
  });
  app.addHook('preHandler', (req, _reply, done) => {
    if (!req.span) return done();
    context.with(trace.setSpan(context.active(), req.span), done);
  });
  app.addHook('onResponse', (req, reply, done) => {
    endServerSpan(req, reply.statusCode);
    done();
  });
  // A client that goes away before the answer (a closed stream) still ends the span.
  app.addHook('onRequestAbort', (req, done) => {
    endServerSpan(req, 499);
    done();
  });
}

function endServerSpan(req: FastifyRequest, status: number) {
  const span = req.span;
  if (!span) return;
  req.span = undefined;
  span.setAttribute('http.response.status_code', status);
  if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}

const routeOf = (req: FastifyRequest) => req.routeOptions.url ?? 'unmatched';
