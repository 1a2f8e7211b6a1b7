# Switchboard runs compiled: `npm run build` (tsc to dist/, plus the workflow bundles prebuilt) in a build stage, and
# plain node on dist/ in the image, as `npm start` does.
# bookworm (glibc), not Alpine: the Temporal core-bridge native module does not load on musl.
FROM node:20-bookworm-slim AS build
WORKDIR /app
# All dependencies: the build needs TypeScript (a dev dependency).
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production

# jemalloc instead of glibc's malloc: with glibc's per-thread arenas the process (V8's threads, the workflow
# thread, the Temporal core's Rust threads) kept what it freed: 10 s after pausing 1,000 tasks in input-required
# it was still +40 MB (median of 3), after 3,000 +144 MB; with jemalloc -47 MB and -69 MB, below where it
# started (docs/benchmark.md, "Paused tasks").
RUN apt-get update && apt-get install -y --no-install-recommends libjemalloc2 && rm -rf /var/lib/apt/lists/* \
  && ln -s "$(dpkg -L libjemalloc2 | grep '/libjemalloc\.so\.2$')" /usr/local/lib/libjemalloc.so.2
ENV LD_PRELOAD=/usr/local/lib/libjemalloc.so.2

# Dependencies first, so source edits don't invalidate this layer. tsx is a runtime dependency: the CLI
# (`npx switchboard`, bin/switchboard.js) runs the TypeScript sources through it.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

COPY . .
COPY --from=build /app/dist ./dist
# The admin key and the credential-sealing key made on first start live here (a volume in docker-compose.yml).
RUN mkdir -p /app/.data && chown node:node /app/.data
USER node
EXPOSE 8080
# node itself, not `npm start`: SIGTERM (docker stop) reaches Switchboard's handler directly, which ends streams,
# drains the worker and exits 0. Run it under an init (compose `init: true`, or `docker run --init`) so the
# signal is forwarded and no child is left behind.
CMD ["node", "dist/src/main.js"]
