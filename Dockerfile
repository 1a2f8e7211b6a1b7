# Switchboard runs TypeScript directly with tsx (`npm start`), so there is no build step.
# bookworm (glibc), not Alpine: the Temporal core-bridge native module does not load on musl.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production

# Dependencies first, so source edits don't invalidate this layer. tsx is a runtime dependency.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

COPY . .
# The admin key and the credential-sealing key made on first start live here (a volume in docker-compose.yml).
RUN mkdir -p /app/.data && chown node:node /app/.data
USER node
EXPOSE 8080
# node itself, not `npm start`: SIGTERM (docker stop) reaches Switchboard's handler directly, which ends streams,
# drains the worker and exits 0. Run it under an init (compose `init: true`, or `docker run --init`) so the
# signal is forwarded and no child is left behind.
CMD ["node", "--import", "tsx", "src/main.ts"]
