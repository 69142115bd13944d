//! Plain HTTP/1.1 GETs of a node's endpoints, bounded in time and size: the
//! Prometheus scrape the bench and the scale mode read ([`scrape`], parsed by
//! [`crate::prometheus`]), and the blocking [`http_get`] the end-to-end tests
//! use. One response reader ([`parse_response`]: status, end of headers,
//! chunked bodies) serves both.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::prometheus::{self, Sample};

/// Longest a scrape may take.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest a blocking GET waits for the next bytes of its answer.
pub const HTTP_READ_TIMEOUT: Duration = Duration::from_secs(10);

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
    stream
        .write_all(request(address, path).as_bytes())
        .await
        .map_err(|error| format!("send to {address}: {error}"))?;
    let mut response = Vec::new();
    stream
        .take(SCRAPE_BYTES_MAX)
        .read_to_end(&mut response)
        .await
        .map_err(|error| format!("read from {address}: {error}"))?;
    let reason = |reason: String| format!("GET http://{address}{path}: {reason}");
    match parse_response(&response).map_err(reason)? {
        (200, body) => Ok(body),
        (status, _) => Err(reason(format!("status {status}"))),
    }
}

/// A blocking GET of `path` from `address` (`host:port`): the status code
/// and the body (chunked bodies decoded), whatever the status. For callers
/// without a runtime at hand, such as the end-to-end tests' checks.
pub fn http_get(address: &str, path: &str) -> Result<(u16, String), String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address)
        .map_err(|error| format!("connect to {address}: {error}"))?;
    stream
        .set_read_timeout(Some(HTTP_READ_TIMEOUT))
        .map_err(|error| format!("read timeout on {address}: {error}"))?;
    stream
        .write_all(request(address, path).as_bytes())
        .map_err(|error| format!("send to {address}: {error}"))?;
    let mut response = Vec::new();
    stream
        .take(SCRAPE_BYTES_MAX)
        .read_to_end(&mut response)
        .map_err(|error| format!("read from {address}: {error}"))?;
    parse_response(&response).map_err(|reason| format!("GET http://{address}{path}: {reason}"))
}

/// The request both GETs send: the connection closes after the answer, so
/// the answer ends where the stream does.
fn request(address: &str, path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nAccept: */*\r\n\r\n")
}

/// The status and body of a whole HTTP/1.1 response (a chunked body
/// decoded; the body read as UTF-8, invalid bytes replaced).
pub fn parse_response(response: &[u8]) -> Result<(u16, String), String> {
    let head_end = response
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .ok_or_else(|| "no end of headers".to_owned())?;
    let head = String::from_utf8_lossy(&response[..head_end]);
    let body = &response[head_end + 4..];
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| format!("no status in {:?}", head.lines().next().unwrap_or("")))?;
    let chunked = head.lines().any(|line| {
        let line = line.to_ascii_lowercase();
        line.starts_with("transfer-encoding:") && line.contains("chunked")
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// The bytes of a chunked body, up to its last (empty) chunk; trailers are
/// ignored.
fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = body
            .windows(2)
            .position(|window| window == b"\r\n")
            .ok_or_else(|| "chunk size line missing".to_owned())?;
        let line = String::from_utf8_lossy(&body[..line_end]);
        let size = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16)
            .map_err(|error| format!("bad chunk size {size:?}: {error}"))?;
        if size == 0 {
            return Ok(out);
        }
        let rest = &body[line_end + 2..];
        let chunk = rest
            .get(..size)
            .ok_or_else(|| "chunk shorter than its size".to_owned())?;
        out.extend_from_slice(chunk);
        body = rest
            .get(size..)
            .and_then(|rest| rest.strip_prefix(b"\r\n"))
            .ok_or_else(|| "chunk not followed by CRLF".to_owned())?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_chunked_bodies_read_the_same() {
        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\na 1\nb\n";
        assert_eq!(
            parse_response(plain).expect("plain"),
            (200, "a 1\nb\n".into())
        );
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\na 1\n\r\n2\r\nb\n\r\n0\r\n\r\n";
        assert_eq!(
            parse_response(chunked).expect("chunked"),
            (200, "a 1\nb\n".into())
        );
    }

    #[test]
    fn chunk_sizes_count_bytes_not_characters() {
        // "é" is two bytes: a chunk of 3 holds "é" and "x".
        let chunked =
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3;ext=1\r\néx\r\n0\r\n\r\n";
        let (_, body) = parse_response(chunked.as_bytes()).expect("chunked");
        assert_eq!(body, "éx");
    }

    #[test]
    fn any_status_is_returned_and_a_cut_response_is_an_error() {
        let (status, _) = parse_response(b"HTTP/1.1 404 Not Found\r\n\r\n").expect("a response");
        assert_eq!(status, 404);
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\n").is_err(),
            "no end of headers"
        );
        let truncated = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nshort\r\n";
        assert!(parse_response(truncated).is_err());
    }

    #[test]
    fn a_blocking_get_reads_a_served_answer() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let address = listener.local_addr().expect("bound").to_string();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("a connection");
            let mut request = [0u8; 1024];
            let read = stream.read(&mut request).expect("the request");
            assert!(request[..read].starts_with(b"GET /metrics HTTP/1.1\r\n"));
            stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
                )
                .expect("the answer");
        });
        assert_eq!(
            http_get(&address, "/metrics").expect("answered"),
            (200, "ok".into())
        );
        server.join().expect("the server thread");
    }
}
