//! A real Prometheus server scrapes a real three-node cluster: every node's
//! `/metrics` endpoint is in the format Prometheus ingests, and
//! `partitions_untrusted_log` is 0 on every healthy node.
//!
//! Needs the `prometheus` binary on `PATH` (Debian package `prometheus`;
//! `scripts/test.sh` installs it). Without it the test fails: it does not skip.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use strand_bench::scrape::http_get;

/// A Prometheus server process; killed when dropped.
struct Prometheus {
    child: Child,
    address: String,
    log: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `prometheus` executable on `PATH`.
fn prometheus_binary() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("prometheus"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "the `prometheus` binary is not on PATH: install the Debian package \
                 `prometheus` (scripts/test.sh installs it)"
            )
        })
}

/// Starts Prometheus (`binary`) scraping `targets` every second, with its
/// storage and log under `dir`.
fn start_prometheus(binary: &Path, dir: &Path, targets: &[String]) -> Prometheus {
    let targets: Vec<String> = targets.iter().map(|target| format!("'{target}'")).collect();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
         scrape_configs:\n  - job_name: strand\n    static_configs:\n      - targets: [{}]\n",
        targets.join(", ")
    );
    let config_path = dir.join("prometheus.yml");
    std::fs::write(&config_path, config).expect("write prometheus.yml");
    let address = format!("127.0.0.1:{}", common::free_port());
    let log = dir.join("prometheus.log");
    let log_file = std::fs::File::create(&log).expect("prometheus log");
    let child = Command::new(binary)
        .arg(format!("--config.file={}", config_path.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("prometheus-data").display()
        ))
        .arg(format!("--web.listen-address={address}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
    Prometheus {
        child,
        address,
        log,
    }
}

/// One sample of an instant-vector query result: the `instance` label and
/// the value, as Prometheus prints them.
#[derive(Debug, PartialEq, Eq)]
struct Sample {
    instance: String,
    value: String,
}

/// The samples in a `/api/v1/query` response body (a successful instant
/// vector), read without a JSON library: each result carries
/// `"instance":"…"` and `"value":[<time>,"<value>"]`.
fn samples(body: &str) -> Vec<Sample> {
    if !body.contains("\"status\":\"success\"") {
        return Vec::new();
    }
    let Some((_, results)) = body.split_once("\"result\":[") else {
        return Vec::new();
    };
    results
        .split("{\"metric\":")
        .skip(1)
        .filter_map(|result| {
            let instance = result
                .split_once("\"instance\":\"")?
                .1
                .split_once('"')?
                .0
                .to_owned();
            let value = result
                .split_once("\"value\":[")?
                .1
                .split_once(",\"")?
                .1
                .split_once('"')?
                .0
                .to_owned();
            Some(Sample { instance, value })
        })
        .collect()
}

#[test]
fn prometheus_scrapes_every_node_and_sees_no_untrusted_log() {
    let binary = prometheus_binary();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut nodes = common::start_cluster(dir.path());
    let targets: Vec<String> = nodes
        .iter()
        .map(|node| node.metrics_address.clone())
        .collect();
    let prometheus = start_prometheus(&binary, dir.path(), &targets);

    let deadline = Instant::now() + Duration::from_secs(60);
    let query = "/api/v1/query?query=partitions_untrusted_log";
    let mut last = String::new();
    let samples = loop {
        if let Ok((200, body)) = http_get(&prometheus.address, query) {
            let samples = samples(&body);
            if samples.len() == targets.len() {
                break samples;
            }
            last = body;
        }
        if Instant::now() >= deadline {
            let log = std::fs::read_to_string(&prometheus.log).unwrap_or_default();
            panic!(
                "Prometheus at {} did not return partitions_untrusted_log for all of \
                 {targets:?} within 60 s; last answer: {last:?}; its log:\n{log}",
                prometheus.address
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let mut instances: Vec<&str> = samples
        .iter()
        .map(|sample| sample.instance.as_str())
        .collect();
    instances.sort_unstable();
    let mut expected: Vec<&str> = targets.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(instances, expected, "one sample per node");
    for sample in &samples {
        assert_eq!(
            sample.value, "0",
            "{}: a healthy node has no untrusted log",
            sample.instance
        );
    }
    for node in &mut nodes {
        node.assert_alive();
    }
    drop(prometheus);
    drop(nodes);
}

#[test]
fn query_results_are_read_per_instance() {
    let body = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"partitions_untrusted_log","instance":"127.0.0.1:1","job":"strand"},"value":[1700000000.5,"0"]},{"metric":{"__name__":"partitions_untrusted_log","instance":"127.0.0.1:2","job":"strand"},"value":[1700000000.5,"2"]}]}}"#;
    assert_eq!(
        samples(body),
        vec![
            Sample {
                instance: "127.0.0.1:1".into(),
                value: "0".into()
            },
            Sample {
                instance: "127.0.0.1:2".into(),
                value: "2".into()
            },
        ]
    );
    assert!(samples(r#"{"status":"error","error":"bad"}"#).is_empty());
}
