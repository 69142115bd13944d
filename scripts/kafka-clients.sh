#!/usr/bin/env bash
# Installs the Kafka clients the real-process Kafka tests drive, unchanged,
# from their own registries: kcat (librdkafka) from Debian, the Java client
# from Maven Central (its class path written to target/kafka-clients/).
# Called by scripts/test.sh; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

out=target/kafka-clients
mkdir -p "$out"
if ! command -v mvn >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then
  echo "scripts/kafka-clients.sh: the Java Kafka client test needs java and mvn on PATH" >&2
  exit 1
fi
echo "== resolving the Java Kafka client (Maven Central)"
mvn -q -B -f server/tests/kafka_clients/java/pom.xml dependency:build-classpath \
  -Dmdep.outputFile="$PWD/$out/java.classpath" >/dev/null
test -s "$out/java.classpath"
