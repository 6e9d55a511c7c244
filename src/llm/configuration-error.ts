/** Moved to the error hierarchy's module; this path stays for existing imports. */
export { ConfigurationError } from "../errors/configuration-error.js";
