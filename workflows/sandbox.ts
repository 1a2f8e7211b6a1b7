/**
 * Loaded once into each workflow thread's V8 context before any workflow runs (the bundler's `preloadModules`,
 * src/worker/worker.ts workflowBundleOptions), while its globals can still be changed: the SDK freezes them afterwards.
 *
 * The SDK captures a stack trace for every promise a workflow makes and maps each frame through the bundle's source
 * map, for Temporal UI's "Stack Trace" tab. With V8's default of 10 frames that was the largest item on the workflow
 * thread: over a third of its time per task (docs/operations.md: "Stack traces in the workflow sandbox"). Two frames keep the
 * place an error was thrown (and its caller) in a workflow's failures; the UI's Stack Trace tab shows little for a
 * task workflow then. Its Details (state, webhooks, job) and search attributes are what operators read.
 */
Error.stackTraceLimit = 2;

export {};
