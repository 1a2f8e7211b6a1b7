/**
 * Starts OpenTelemetry tracing (see src/core/tracing.ts for what is traced). Kept apart from the helpers so that
 * a process without tracing never loads the SDK.
 */
import { NodeSDK } from '@opentelemetry/sdk-node';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { BatchSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Resource } from '@opentelemetry/resources';
import { OpenTelemetryPlugin } from '@temporalio/interceptors-opentelemetry';
import { setTracingEnabled } from './tracing';

export interface Tracing {
  /** For the Temporal Client and Worker (`plugins`): spans for start/update/query, the workflow and its activities. */
  plugin: OpenTelemetryPlugin;
  /** Flushes what is buffered and stops exporting. */
  shutdown(): Promise<void>;
}

export interface TracingOptions {
  /** Where spans go; default a batching OTLP/HTTP exporter configured by the OTEL_EXPORTER_OTLP_* variables. */
  spanProcessor?: SpanProcessor;
  serviceName?: string;
}

/** Registers the global tracer provider, the AsyncLocalStorage context manager and the W3C propagator. */
export function startTracing(opts: TracingOptions = {}): Tracing {
  const resource = new Resource({ 'service.name': opts.serviceName ?? process.env.OTEL_SERVICE_NAME ?? 'switchboard' });
  const spanProcessor = opts.spanProcessor ?? new BatchSpanProcessor(new OTLPTraceExporter());
  // Only traces: logs are pino's and metrics are /metrics, so no log or metric exporter starts.
  const sdk = new NodeSDK({ resource, spanProcessors: [spanProcessor], logRecordProcessors: [], autoDetectResources: false });
  sdk.start();
  setTracingEnabled(true);
  return {
    plugin: new OpenTelemetryPlugin({ resource, spanProcessor }),
    async shutdown() {
      setTracingEnabled(false);
      await sdk.shutdown();
    },
  };
}
