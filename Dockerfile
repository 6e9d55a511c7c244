# agentloop in a container: `docker compose up --build` runs it with NATS (see docker-compose.yml).
FROM node:20-bookworm-slim

WORKDIR /app
# Sources first, then one `npm ci`: its `prepare` script compiles them (it needs the dev
# dependencies), and the dev dependencies are pruned afterwards.
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
COPY machines ./machines
COPY actors ./actors
COPY bench ./bench
RUN npm ci --no-audit --no-fund && npm prune --omit=dev --no-audit --no-fund && npm cache clean --force

ENV NODE_ENV=production
RUN mkdir -p /data /logs && chown node:node /data /logs
USER node
ENTRYPOINT ["node", "dist/src/cli/bin.js"]
CMD ["up"]
