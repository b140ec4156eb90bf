// The OpenAI-compatible server (issue #22): `nbx.serve(model, options)` and `nbx serve`.
// Node only (node:http); the package's entry point reaches it through a dynamic import.

export { serve, type ServeOptions, type ServeHandle } from './server.js';
export { ApiError, parseChatRequest, parseCompletionRequest, type ParsedRequest } from './protocol.js';
export { ServerMetrics, Histogram, parsePrometheus, type GaugeSnapshot } from './metrics.js';
