#!/usr/bin/env bash
# Runs every Strand test on a fresh machine: first installs what the tests
# need and a Rust toolchain does not bring (the `prometheus` binary, which
# server/tests/prometheus.rs scrapes a real cluster with, and the `openssl`
# command line, which server/tests/tls.rs checks the nodes' TLS with), then
# the whole suite. Arguments go to `cargo test` (for example `-p strand-client`).
set -euo pipefail
cd "$(dirname "$0")/.."

install_prometheus() {
  if command -v prometheus >/dev/null 2>&1; then
    return
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "scripts/test.sh: the tests need the \`prometheus\` binary on PATH and this" >&2
    echo "machine has no apt-get to install it: install Prometheus, then run again" >&2
    exit 1
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  echo "== installing prometheus (Debian package; needed by server/tests/prometheus.rs)"
  $sudo apt-get update -qq
  # No service start inside containers or CI: the test runs its own instance.
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
  command -v prometheus >/dev/null 2>&1 || {
    echo "scripts/test.sh: apt-get installed prometheus but it is not on PATH" >&2
    exit 1
  }
}

# server/tests/tls.rs checks the nodes' TLS with a client that is not ours.
install_openssl() {
  if command -v openssl >/dev/null 2>&1; then
    return
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "scripts/test.sh: the tests need the \`openssl\` command line; install it, then run again" >&2
    exit 1
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  echo "== installing openssl (needed by server/tests/tls.rs)"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null
}

install_prometheus
install_openssl
exec cargo test --workspace --all-features --locked "$@"
