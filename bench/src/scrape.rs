//! Scraping a node's Prometheus endpoint: a plain HTTP/1.1 GET of
//! `/metrics`, bounded in time and size, parsed by [`crate::prometheus`].

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::prometheus::{self, Sample};

/// Longest a scrape may take.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest response read (a node's scrape is a few KiB).
pub const SCRAPE_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// The samples on `address`'s `/metrics` (`address` is `host:port`).
pub async fn scrape(address: &str) -> Result<Vec<Sample>, String> {
    let body = tokio::time::timeout(SCRAPE_TIMEOUT, get(address, "/metrics"))
        .await
        .map_err(|_| format!("GET http://{address}/metrics: no answer in {SCRAPE_TIMEOUT:?}"))??;
    prometheus::parse(&body).map_err(|error| format!("http://{address}/metrics: {error}"))
}

/// The body of a `200 OK` answer to `GET path`.
async fn get(address: &str, path: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(address)
        .await
        .map_err(|error| format!("connect to {address}: {error}"))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|error| format!("send to {address}: {error}"))?;
    let mut response = Vec::new();
    stream
        .take(SCRAPE_BYTES_MAX)
        .read_to_end(&mut response)
        .await
        .map_err(|error| format!("read from {address}: {error}"))?;
    let text = String::from_utf8_lossy(&response);
    parse_response(&text).map_err(|reason| format!("GET http://{address}{path}: {reason}"))
}

/// The body of an HTTP/1.1 response whose status is 200 (chunked decoded).
fn parse_response(text: &str) -> Result<String, String> {
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| "no end of headers".to_owned())?;
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(format!("status {status:?}"));
    }
    let chunked = head.lines().any(|line| {
        let line = line.to_ascii_lowercase();
        line.starts_with("transfer-encoding:") && line.contains("chunked")
    });
    if chunked {
        dechunk(body)
    } else {
        Ok(body.to_owned())
    }
}

fn dechunk(mut body: &str) -> Result<String, String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body
            .split_once("\r\n")
            .ok_or_else(|| "chunk size line missing".to_owned())?;
        let size = size.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16)
            .map_err(|error| format!("bad chunk size {size:?}: {error}"))?;
        if size == 0 {
            return Ok(out);
        }
        let chunk = rest
            .get(..size)
            .ok_or_else(|| "chunk shorter than its size".to_owned())?;
        out.push_str(chunk);
        body = rest
            .get(size..)
            .and_then(|rest| rest.strip_prefix("\r\n"))
            .ok_or_else(|| "chunk not followed by CRLF".to_owned())?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_chunked_bodies_read_the_same() {
        let plain = "HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\na 1\nb\n";
        assert_eq!(parse_response(plain).expect("plain"), "a 1\nb\n");
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\na 1\n\r\n2\r\nb\n\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).expect("chunked"), "a 1\nb\n");
    }

    #[test]
    fn an_error_status_is_an_error() {
        let error = parse_response("HTTP/1.1 404 Not Found\r\n\r\n").expect_err("404");
        assert!(error.contains("404"));
    }
}
