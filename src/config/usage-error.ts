/**
 * A user's mistake in what they configured (a command-line flag, an environment variable, an
 * option of `startHost`): the CLI prints it as one line and exits with code 2.
 */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}
