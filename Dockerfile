# Multi-stage build of the whole workspace: `build` compiles every package, `runtime` keeps production
# dependencies and compiled output only.
FROM node:24-bookworm-slim AS build
ENV TURBO_TELEMETRY_DISABLED=1
WORKDIR /app
COPY package.json package-lock.json turbo.json tsconfig.base.json ./
COPY packages ./packages
COPY apps ./apps
COPY bench/package.json ./bench/package.json
RUN npm ci --no-audit --no-fund
RUN npx turbo run build

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production TURBO_TELEMETRY_DISABLED=1 ENGRAM_HOME=/data/engram
WORKDIR /app
COPY package.json package-lock.json ./
COPY --from=build /app/packages ./packages
COPY --from=build /app/apps ./apps
COPY bench/package.json ./bench/package.json
RUN npm ci --omit=dev --no-audit --no-fund && mkdir -p /data/engram /workspaces && chown -R node:node /data/engram /workspaces
USER node
ENV PATH=/app/node_modules/.bin:$PATH
CMD ["node", "apps/agent/dist/bin/engram.js", "--help"]
