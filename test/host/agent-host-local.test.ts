import { LocalBus } from "../../src/bus/local-bus.js";
import { registerAgentHostContractTests } from "./agent-host-contract.js";

registerAgentHostContractTests("LocalBus", {
  createBus: async () => new LocalBus(),
  canSendOversized: true,
  fuzzRuns: 1_500,
});
