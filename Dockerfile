# drainguard: one image for the webhook and the sidecar.
#   docker build -t drainguard:0.1.0 .
# Build stage: install with the lockfile, bundle the CLI with esbuild (dist/drainguard.mjs + chunks).
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN node scripts/bundle.ts

# Runtime: Node 24 and the netfilter tools the sidecar calls (ebtables comes from iptables on
# bookworm as ebtables-nft). The bundle needs no node_modules.
FROM node:24-bookworm-slim
# No package managers at runtime: the sidecar runs as root with NET_ADMIN on every node, and
# the bundle needs none of them.
RUN apt-get update \
 && apt-get install -y --no-install-recommends iproute2 nftables iptables \
 && rm -rf /var/lib/apt/lists/* \
 && rm -rf /usr/local/lib/node_modules /opt/yarn-* \
      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /usr/local/bin/yarn /usr/local/bin/yarnpkg
WORKDIR /app
COPY --from=build /src/dist/ /app/
COPY --from=build /src/scripts/drainguard-entrypoint.sh /usr/local/bin/drainguard
# Non-root by default; the injected sidecar runs as root only where it needs NET_ADMIN (pod spec).
USER 65532:65532
ENTRYPOINT ["drainguard"]
CMD ["--help"]
