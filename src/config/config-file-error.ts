import { ConfigurationError } from "../errors/configuration-error.js";

/** A bad config file (`--config`): the message names the file and the field. Exit code 2 in the CLI. */
export class ConfigFileError extends ConfigurationError {
  /** The config file as it was given. */
  readonly path: string;

  constructor(path: string, reason: string, options: { cause?: unknown } = {}) {
    super(`config file ${path}: ${reason}`, options);
    this.path = path;
  }
}
