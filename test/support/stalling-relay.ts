import { createConnection, createServer, type Server, type Socket } from "node:net";

/** A TCP relay to the nats-server that can be stalled: nothing passes either way until resumed. */
export interface StallingRelay {
  url: string;
  stall(): void;
  resume(): void;
  close(): Promise<void>;
}

export async function startRelay(target: string): Promise<StallingRelay> {
  const { hostname, port } = new URL(target);
  const sockets: Socket[] = [];
  let isStalled = false;
  const server: Server = createServer((client) => {
    const upstream = createConnection({ host: hostname, port: Number(port) });
    sockets.push(client, upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    if (isStalled) for (const socket of [client, upstream]) socket.pause();
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("the relay has no port");
  return {
    url: `nats://127.0.0.1:${address.port}`,
    stall() {
      isStalled = true;
      // Paused both ways: the client's writes pile up unread and no answer comes back.
      for (const socket of sockets) socket.pause();
    },
    resume() {
      isStalled = false;
      for (const socket of sockets) socket.resume();
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
