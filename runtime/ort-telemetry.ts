/**
 * onnxruntime 1.30 on Linux ships Microsoft's telemetry: a process that creates a session keeps an
 * event store in `~/.cache/Microsoft/DeveloperTools/.onnxruntime/onnxruntime.db`, leaves a
 * `/tmp/mat-debug-<pid>.log`, and tries to upload to mobile.events.data.microsoft.com (strace of
 * an actor under load: a DNS lookup from fresh threads every 3 s, and SQLite writes). A serving
 * runtime must not phone home from its users' machines or litter them by default, so Troupe turns
 * it off in every process it runs models in. `ORT_DISABLE_TELEMETRY` set beforehand wins (`0`
 * opts back in). Call before the process creates its first session: ORT reads it then.
 */
export function disableOrtTelemetryByDefault(): void {
  process.env.ORT_DISABLE_TELEMETRY ??= '1';
}
