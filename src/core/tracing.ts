/**
 * OpenTelemetry traces: one trace per request, front door → workflow → activity → the agent's HTTP call.
 *
 * These helpers depend on the OpenTelemetry API only and do nothing until src/core/tracing-sdk.ts has started the
 * SDK (src/main.ts does when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set). On,
 * a request joins the W3C `traceparent` its client sent, the Temporal interceptors carry the context through
 * workflow and activity headers, and every outbound call (agents, cards, webhooks) sends `traceparent` on.
 */
import { context, propagation, trace, SpanKind, SpanStatusCode, ROOT_CONTEXT } from '@opentelemetry/api';

/** The tracer of every span Switchboard starts (the API's request spans too: src/api/plugins/request-spans.ts). */
export const tracer = trace.getTracer('switchboard');
let enabled = false;

/** Whether the SDK is on: off, no span is started. */
export function tracingEnabled(): boolean {
  return enabled;
}

/** Called by the SDK's start and shutdown (src/core/tracing-sdk.ts). */
export function setTracingEnabled(on: boolean): void {
  enabled = on;
}

/** Whether the environment names an OTLP endpoint for traces (then src/main.ts starts the SDK). */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/** Attributes for the request's span (the A2A method, tenant, task), when tracing is on. */
export function annotate(attributes: Record<string, string | number | undefined>): void {
  if (!enabled) return;
  const span = trace.getActiveSpan();
  if (!span) return;
  for (const [k, v] of Object.entries(attributes)) if (v !== undefined) span.setAttribute(k, v);
}

/**
 * Runs an outbound HTTP call in a client span and sends `traceparent` (and `tracestate`) with it. The span
 * ends when the response headers arrive: a streamed body can last far longer than the call it answers.
 */
export async function traceOutbound<R extends { status: number }>(
  method: string,
  url: string,
  headers: { set(name: string, value: string): void },
  call: () => Promise<R>,
): Promise<R> {
  if (!enabled) return call();
  const target = new URL(url);
  const span = tracer.startSpan(`${method} ${target.host}`, {
    kind: SpanKind.CLIENT,
    attributes: { 'http.request.method': method, 'server.address': target.hostname, 'url.full': `${target.origin}${target.pathname}` },
  });
  const ctx = trace.setSpan(context.active(), span);
  propagation.inject(ctx, headers, { set: (carrier, k, v) => carrier.set(k, v) });
  try {
    const res = await context.with(ctx, call);
    span.setAttribute('http.response.status_code', res.status);
    if (res.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    return res;
  } catch (err) {
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
    throw err;
  } finally {
    span.end();
  }
}

/**
 * The active trace context as W3C headers (`traceparent`, `tracestate`), for calls that are not HTTP requests
 * through the outbound client (gRPC metadata); empty while tracing is off.
 */
export function traceHeaders(): Record<string, string> {
  if (!enabled) return {};
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier;
}

/**
 * A server span for a call that does not come through Fastify (gRPC), parented on the `traceparent` in its
 * metadata; `run` goes on inside it and ends it with the call's status code (0 = OK).
 */
export function traceServerCall(name: string, carrier: Record<string, string>, attributes: Record<string, string>, run: (end: (code?: number) => void) => void): void {
  if (!enabled) return run(() => undefined);
  const parent = propagation.extract(ROOT_CONTEXT, carrier);
  const span = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
  let ended = false;
  const end = (code?: number) => {
    if (ended) return;
    ended = true;
    if (code !== undefined) span.setAttribute('rpc.grpc.status_code', code);
    if (code) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  };
  context.with(trace.setSpan(parent, span), () => run(end));
}
