#!/usr/bin/env bash
# Runs every Strand test on a fresh machine: first installs what the tests
# need and a Rust toolchain does not bring (the `prometheus` binary, which
# server/tests/prometheus.rs scrapes a real cluster with, and the `openssl`
# command line, which server/tests/tls.rs checks the nodes' TLS with), then
# the whole suite. Arguments go to `cargo test` (for example `-p strand-client`).
set -euo pipefail
cd "$(dirname "$0")/.."

# Installs Debian package $1 (which provides the command $1) unless the
# command is there; $2 says which test needs it.
install_command() {
  local command="$1" needed_by="$2"
  if command -v "$command" >/dev/null 2>&1; then
    return
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "scripts/test.sh: the tests need \`$command\` on PATH ($needed_by) and this" >&2
    echo "machine has no apt-get to install it: install it, then run again" >&2
    exit 1
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  echo "== installing $command (Debian package; needed by $needed_by)"
  $sudo apt-get update -qq
  # No service start inside containers or CI: the tests run their own.
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$command" >/dev/null
  command -v "$command" >/dev/null 2>&1 || {
    echo "scripts/test.sh: apt-get installed $command but it is not on PATH" >&2
    exit 1
  }
}

install_command prometheus server/tests/prometheus.rs
install_command openssl server/tests/tls.rs
install_command kcat server/tests/kafka.rs
scripts/kafka-clients.sh
exec cargo test --workspace --all-features --locked "$@"
