#!/usr/bin/env bash
# Kafka's own performance tools against a local Strand cluster and a local
# 3-node Apache Kafka cluster (KRaft, RF 3, acks=all, min.insync.replicas=2),
# alternated, with the same client settings. Everything Kafka comes from
# Maven Central (bench/kafka/pom.xml); nothing of it is committed.
#
#   bench/kafka/kafka-bench.sh run [rounds] [records]   both, alternated; prints a table
#   bench/kafka/kafka-bench.sh kafka-start <dir>         a 3-node Kafka cluster on 127.0.0.1:1909{1,2,3}
#   bench/kafka/kafka-bench.sh kafka-stop <dir>
#   bench/kafka/kafka-bench.sh perf <bootstrap> <topic> <records> [throughput]
set -euo pipefail
cd "$(dirname "$0")/../.."

out=target/kafka-bench
mkdir -p "$out"
classpath() {
  if [ ! -s "$out/kafka.classpath" ]; then
    mvn -q -B -Dstyle.color=never -f bench/kafka/pom.xml dependency:build-classpath \
      -Dmdep.outputFile="$PWD/$out/kafka.classpath" >/dev/null
  fi
  cat "$out/kafka.classpath"
}

# The client settings both clusters get (Kafka's performance docs' batch
# size, acks=all).
PRODUCER_PROPS=(acks=all batch.size=65536 linger.ms=5 buffer.memory=67108864)

kafka_start() {
  local dir="$1" cp id
  cp="$(classpath)"
  mkdir -p "$dir"
  id="$(java -cp "$cp" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)"
  for node in 1 2 3; do
    cat > "$dir/server-$node.properties" <<PROPS
process.roles=broker,controller
node.id=$node
controller.quorum.voters=1@127.0.0.1:19191,2@127.0.0.1:19192,3@127.0.0.1:19193
listeners=PLAINTEXT://127.0.0.1:1909$node,CONTROLLER://127.0.0.1:1919$node
advertised.listeners=PLAINTEXT://127.0.0.1:1909$node
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data-$node
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
group.initial.rebalance.delay.ms=0
PROPS
    java -cp "$cp" kafka.tools.StorageTool format -t "$id" -c "$dir/server-$node.properties" >/dev/null
    nohup java -Xms1g -Xmx1g -cp "$cp" kafka.Kafka "$dir/server-$node.properties" \
      >"$dir/node-$node.log" 2>&1 &
    echo $! > "$dir/node-$node.pid"
  done
  for _ in $(seq 1 60); do
    if java -cp "$cp" org.apache.kafka.tools.TopicCommand --bootstrap-server 127.0.0.1:19091 --list >/dev/null 2>&1; then
      return 0
    fi
    sleep 1
  done
  echo "kafka-bench: the Kafka cluster did not come up (logs in $dir)" >&2
  return 1
}

kafka_stop() {
  local dir="$1"
  for pid in "$dir"/node-*.pid; do
    [ -e "$pid" ] && kill "$(cat "$pid")" 2>/dev/null || true
  done
  sleep 3
}

# perf <bootstrap> <topic> <records> [throughput]: one producer-perf run;
# prints its summary line.
perf() {
  local cp
  cp="$(classpath)"
  java -cp "$cp" org.apache.kafka.tools.ProducerPerformance --topic "$2" --num-records "$3" \
    --record-size 1024 --throughput "${4:--1}" \
    --producer-props bootstrap.servers="$1" "${PRODUCER_PROPS[@]}" 2>/dev/null | tail -1
}

create_topic() {
  local cp
  cp="$(classpath)"
  java -cp "$cp" org.apache.kafka.tools.TopicCommand --bootstrap-server "$1" --create \
    --topic "$2" --partitions "$3" --replication-factor 3 >/dev/null
}

# strand_start <dir>: a local 3-node Strand cluster (plaintext) serving
# Kafka on 127.0.0.1:1940{1,2,3}; strand_stop stops it.
strand_start() {
  local dir="$1"
  rm -rf "$dir" && mkdir -p "$dir"
  cargo build -q --release -p strand-server
  nohup target/release/strand-server dev-cluster --insecure --data "$dir/data" --port 19100 \
    >"$dir/dev-cluster.log" 2>&1 &
  echo $! > "$dir/dev-cluster.pid"
  for _ in $(seq 1 60); do
    if create_topic 127.0.0.1:19401 probe 1 2>/dev/null; then
      return 0
    fi
    sleep 1
  done
  echo "kafka-bench: the Strand cluster did not come up (logs in $dir)" >&2
  return 1
}

strand_stop() {
  kill -INT "$(cat "$1/dev-cluster.pid")" 2>/dev/null || true
  sleep 3
}

# One round on one system: a fresh cluster, a 3-partition topic, the
# producer at full speed, then at `rate` records/s (if given); prints
# "<system> full <summary>" and "<system> rate <summary>".
round() {
  local system="$1" dir="$2" records="$3" rate="${4:-}" bootstrap
  case "$system" in
    strand) strand_start "$dir"; bootstrap=127.0.0.1:19401,127.0.0.1:19402,127.0.0.1:19403 ;;
    kafka) rm -rf "$dir"; kafka_start "$dir"; bootstrap=127.0.0.1:19091,127.0.0.1:19092,127.0.0.1:19093 ;;
  esac
  create_topic "${bootstrap%%,*}" perf 3
  sleep 2
  echo "$system full $(perf "$bootstrap" perf "$records")"
  if [ -n "$rate" ]; then
    echo "$system rate $(perf "$bootstrap" perf "$records" "$rate")"
  fi
  case "$system" in
    strand) strand_stop "$dir" ;;
    kafka) kafka_stop "$dir" ;;
  esac
}

# run [rounds] [records] [rate]: both systems, alternated.
run() {
  local rounds="${1:-3}" records="${2:-300000}" rate="${3:-}"
  for round_number in $(seq 1 "$rounds"); do
    round strand "$out/strand" "$records" "$rate"
    round kafka "$out/kafka" "$records" "$rate"
    echo "round $round_number done" >&2
  done
}

case "${1:-}" in
  run) run "${2:-3}" "${3:-300000}" "${4:-}" ;;
  kafka-start) kafka_start "$2" ;;
  kafka-stop) kafka_stop "$2" ;;
  perf) perf "$2" "$3" "$4" "${5:-}" ;;
  create-topic) create_topic "$2" "$3" "$4" ;;
  classpath) classpath ;;
  *) echo "usage: see the top of $0" >&2; exit 2 ;;
esac
