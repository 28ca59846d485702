// The error hierarchy. Every error a user can cause is an RlxError: the CLI prints its message
// (and its fix) without a stack trace and exits non-zero. Anything else is a bug and keeps its stack.

export class RlxError extends Error {
  /** What to do about it, printed on its own line under the message. */
  readonly fix?: string;
  constructor(message: string, options: { fix?: string; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = new.target.name;
    this.fix = options.fix;
  }
}

/** A bad config file, key, value or override: the message names the file and the key path. */
export class ConfigError extends RlxError {}

/** A failed call into the native shim; the message is the shim's (a C++ exception's text). */
export class NativeError extends RlxError {}

/** A model directory or file that cannot be read or written (names the file and tensor). */
export class ModelFileError extends RlxError {}

/** An environment that cannot load tasks or run (a bad dataset file, a missing field). */
export class EnvError extends RlxError {}

/** An HTTP endpoint that failed (names the endpoint and the status). */
export class EndpointError extends RlxError {}

/** A command or feature that exists in the CLI but whose machinery is not built yet. */
export class NotBuiltError extends RlxError {}

export function formatError(err: unknown): string {
  if (err instanceof RlxError) return err.fix ? `${err.message}\n  fix: ${err.fix}` : err.message;
  return err instanceof Error ? (err.stack ?? err.message) : String(err);
}
