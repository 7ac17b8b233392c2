// telemetry (CONTRACT §17): where traces go. What is left unset here, the standard OTEL_*
// variables fill (telemetry/tracing.ts).
import { z } from 'zod';
import { bool, HTTP_URL, isUrl, optionalText, ratio } from './values.js';

/** The bodies an OTLP/HTTP export may have (telemetry.otlp.protocol). */
export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

// Traces: empty endpoint and no OTEL_EXPORTER_OTLP_ENDPOINT, no tracing.
export const telemetrySchema = z.strictObject({
  otlp: z.strictObject({
    endpoint: optionalText.pipe(z.string().refine((u) => HTTP_URL.test(u) && isUrl(u, /^https?:$/), 'expected an http:// or https:// URL such as http://collector:4318').optional())
      .meta({ pattern: `^$|${HTTP_URL.source}`, examples: ['http://collector:4318'], description: 'The collector\'s OTLP/HTTP base URL (traces go to {endpoint}/v1/traces); empty: OTEL_EXPORTER_OTLP_ENDPOINT, else no tracing.' }),
    serviceName: optionalText.meta({ examples: ['auth-gateway'], description: 'service.name of the spans; unset: OTEL_SERVICE_NAME, else auth-gateway.' }),
    sampleRatio: ratio.optional().meta({ description: 'The share of traces the gateway records (0 to 1); unset: OTEL_TRACES_SAMPLER_ARG, else 1.' }),
    trustIncoming: bool().prefault(false).meta({ description: 'true: an incoming traceparent\'s sampled flag decides; false: the gateway decides (a client cannot force sampling).' }),
    protocol: z.enum(OTLP_PROTOCOLS).optional().meta({
      description: 'The export body: http/protobuf (OTLP\'s default) or http/json; unset: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf.',
    }),
  }).prefault({}),
}).prefault({});
