#!/usr/bin/env bash
# Installs the Kafka clients the real-process Kafka tests drive, unchanged,
# each from its own registry, under target/kafka-clients/: the Java client
# from Maven Central (its class path), kafka-python and confluent-kafka
# from PyPI (a virtual environment), kafkajs from npm, franz-go from the Go
# module proxy (built). kcat comes from Debian (scripts/test.sh). Called by
# scripts/test.sh; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

clients=server/tests/kafka_clients
out=target/kafka-clients
mkdir -p "$out"
for command in java mvn python3 node npm go; do
  if ! command -v "$command" >/dev/null 2>&1; then
    echo "scripts/kafka-clients.sh: the Kafka client tests need \`$command\` on PATH" >&2
    exit 1
  fi
done

echo "== the Java Kafka client (Maven Central)"
mvn -q -B -Dstyle.color=never -f "$clients/java/pom.xml" dependency:build-classpath \
  -Dmdep.outputFile="$PWD/$out/java.classpath" >/dev/null
test -s "$out/java.classpath"

echo "== kafka-python and confluent-kafka (PyPI)"
if [ ! -x "$out/python/bin/python" ]; then
  python3 -m venv "$out/python"
fi
"$out/python/bin/pip" install -q --disable-pip-version-check -r "$clients/python/requirements.txt"

echo "== kafkajs (npm)"
mkdir -p "$out/node"
cp "$clients/node/package.json" "$clients/node/client.js" "$out/node/"
(cd "$out/node" && npm install --silent --no-audit --no-fund)

echo "== franz-go (Go module proxy)"
(cd "$clients/go" && go build -o "$PWD/../../../../$out/franz" .)
