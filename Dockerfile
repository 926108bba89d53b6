# syntax=docker/dockerfile:1
#
# Troupe, CPU image: the head, and node agents on machines without a GPU (or with simulated ones).
#   docker build -t troupe .
#   docker run --rm -p 8470:8470 -p 8471:8471 -e TROUPE_TOKEN=… -v troupe-data:/data troupe            # the head
#   docker run --rm -e TROUPE_TOKEN=… -v "$PWD/models:/models:ro" troupe \
#     agent --head ws://HEAD:8470 --name "$(hostname)" --advertise HOST_IP --model-dir /models
# The GPU image (CUDA 12 provider for onnxruntime-node) is Dockerfile.gpu.

ARG NODE_IMAGE=node:20-bookworm-slim

# Build: dev dependencies, TypeScript, the status page's client bundle.
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# The client package is a workspace of this one (packages/client): npm ci needs its manifest.
COPY packages/client/package.json ./packages/client/
# --ignore-scripts: `prepare` would build before the sources are copied in. onnxruntime-node's
# download of the CUDA provider is off anyway (package.json allowScripts), and the CPU provider ships in the package.
RUN npm ci --ignore-scripts
COPY . .
RUN npm run build && rm -rf dist/test dist/bench dist/.tsbuildinfo

# Production dependencies only. `prepare` runs tsc, a dev dependency that is not here: dist/
# comes from the build stage instead, so scripts stay off.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# The client package is a workspace of this one (packages/client): npm ci needs its manifest.
COPY packages/client/package.json ./packages/client/
# onnxruntime-node ships its binding for every OS (about 290 MiB); keep Linux's (both arches).
RUN npm ci --omit=dev --ignore-scripts \
 && find node_modules/onnxruntime-node/bin -mindepth 2 -maxdepth 2 ! -name linux -exec rm -rf {} + \
 && npm cache clean --force

FROM ${NODE_IMAGE} AS runtime
# Beyond loopback the head refuses to start without TROUPE_TOKEN: the image cannot be run open.
ENV NODE_ENV=production \
    TROUPE_HOST=0.0.0.0 \
    TROUPE_PORT=8470 \
    TROUPE_MODEL_CACHE=/data/model-cache
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# node_modules/@troupe/client links to the workspace: 'troupe' (actor modules import it) re-exports it.
COPY --from=build /src/packages/client/package.json ./packages/client/
COPY --from=build /src/packages/client/dist ./packages/client/dist
COPY package.json ./
RUN mkdir -p /data /models && chown node:node /data /models
# The node image's unprivileged user (uid 1000).
USER node
EXPOSE 8470 8471
VOLUME ["/data"]
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["head", "--data-dir", "/data/head"]
