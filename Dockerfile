# syntax=docker/dockerfile:1
# Build stage: compile TypeScript, then drop dev dependencies.
FROM node:26-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# argon2 ships prebuilt binaries: no compiler needed here.
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev

# Runtime stage: only what `node dist/cli.js start` needs, run as the unprivileged `node` user.
FROM node:26-bookworm-slim
ENV NODE_ENV=production
# Every interface inside the container (the gateway's own default on embedded storage is loopback).
ENV HOST=0.0.0.0
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json gateway.yaml gateway.schema.json LICENSE CHANGELOG.md ./
COPY migrations ./migrations
# The console's pages (CONTRACT §16), served by the admin listener.
COPY console ./console
# The customer portal's pages (CONTRACT §30), served by the public listener with portal.enabled.
COPY portal ./portal
# What the package ships beside: `gateway init`'s profiles (CONTRACT §28), the systemd unit.
COPY profiles ./profiles
COPY deploy/systemd ./deploy/systemd
# Embedded storage (no DATABASE_URL) writes here; mount a volume to keep it.
RUN mkdir -p /app/data && chown node:node /app/data
USER node
EXPOSE 8080 9090
# The port (and host) the gateway was configured with: gateway.yaml or GATEWAY_CONFIG, then PORT/HOST.
HEALTHCHECK --interval=10s --timeout=3s CMD ["node", "dist/cli.js", "health"]
# Exec form: node is PID 1 and receives SIGTERM/SIGHUP itself (the gateway handles both).
# A larger young generation: fewer scavenges, the pauses that set a busy proxy's p99 (docs/operating.md).
CMD ["node", "--max-semi-space-size=32", "dist/cli.js", "start"]
