//! The admin listener's HTTP/1.1 server: its own threads, off the shards' cores' executors, so a
//! scrape never delays a Kafka request. Requests are parsed by `httparse` (maintained, zero-copy,
//! fuzzed upstream); this file only bounds and routes them.
//!
//! | bound                        | value                       | past it                  |
//! |------------------------------|-----------------------------|--------------------------|
//! | request head                 | [`HEAD_BYTES_MAX`]          | 431, connection closed   |
//! | headers                      | [`HEADERS_MAX`]             | 431                      |
//! | connections served at once   | [`CONNECTIONS_MAX`]         | 503 at once              |
//! | idle read or slow write      | [`IO_TIMEOUT`]              | connection closed        |
//!
//! One request per connection (`Connection: close`): scrapes and health probes are rare, and a
//! kept-alive idle connection would hold a thread. GET and HEAD only.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::state::AdminState;
use super::{exposition, page, status};

/// Largest request head (request line and headers) read.
pub const HEAD_BYTES_MAX: usize = 16 * 1024;
/// Most headers parsed.
pub const HEADERS_MAX: usize = 64;
/// Connections served at once; more are answered 503 and closed.
pub const CONNECTIONS_MAX: usize = 16;
/// Longest a read or a write may block.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// One response.
#[derive(Debug, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Content type.
    pub content_type: &'static str,
    /// Body.
    pub body: Vec<u8>,
}

impl Response {
    fn text(status: u16, body: impl Into<String>) -> Self {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into().into_bytes(),
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

/// Binds `addr` and serves on a thread of its own; returns the bound address (for port 0).
pub fn start(addr: SocketAddr, state: Arc<AdminState>) -> io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    std::thread::Builder::new()
        .name("rill-admin".into())
        .spawn(move || accept_loop(listener, state))?;
    Ok(local)
}

fn accept_loop(listener: TcpListener, state: Arc<AdminState>) {
    let active = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        if active.fetch_add(1, Ordering::SeqCst) >= CONNECTIONS_MAX {
            active.fetch_sub(1, Ordering::SeqCst);
            let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
            let _ = write_response(&mut stream, &Response::text(503, "busy\n"), false);
            continue;
        }
        let (state, done) = (state.clone(), active.clone());
        let spawned = std::thread::Builder::new()
            .name("rill-admin-conn".into())
            .spawn(move || {
                serve(stream, &state);
                done.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn serve(mut stream: TcpStream, state: &AdminState) {
    let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let (response, head_only) = match read_request(&mut stream) {
        Ok((method, path)) => {
            let head_only = method == "HEAD";
            (route(&method, &path, state), head_only)
        }
        Err(response) => (response, false),
    };
    let _ = write_response(&mut stream, &response, head_only);
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// Reads one request head and returns its method and path, or the error response to send.
fn read_request(stream: &mut impl Read) -> Result<(String, String), Response> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(&buf) {
            Ok(httparse::Status::Complete(_)) => {
                let method = request.method.unwrap_or("").to_string();
                let path = request.path.unwrap_or("").to_string();
                return Ok((method, path));
            }
            Ok(httparse::Status::Partial) => {}
            Err(httparse::Error::TooManyHeaders) => {
                return Err(Response::text(431, "too many headers\n"))
            }
            Err(e) => return Err(Response::text(400, format!("bad request: {e}\n"))),
        }
        if buf.len() >= HEAD_BYTES_MAX {
            return Err(Response::text(431, "request head too large\n"));
        }
        let want = chunk.len().min(HEAD_BYTES_MAX - buf.len());
        match stream.read(&mut chunk[..want]) {
            Ok(0) | Err(_) => return Err(Response::text(400, "incomplete request\n")),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The response to `method path`.
pub fn route(method: &str, path: &str, state: &AdminState) -> Response {
    if method != "GET" && method != "HEAD" {
        return Response::text(405, "only GET and HEAD\n");
    }
    let path = path.split(['?', '#']).next().unwrap_or("");
    match path {
        "/metrics" => {
            let (snapshots, _) = state.snapshots();
            Response {
                status: 200,
                content_type: "text/plain; version=0.0.4; charset=utf-8",
                body: exposition::render(state, &snapshots).into_bytes(),
            }
        }
        "/health/live" => probe(state.live(), "live"),
        "/health/ready" => probe(state.ready(), "ready"),
        "/v1/status" | "/" => {
            let (snapshots, missing) = state.snapshots();
            let groups: Vec<_> = snapshots.into_iter().flat_map(|s| s.groups).collect();
            let status = status::build(state, &groups, missing);
            if path == "/" {
                Response {
                    status: 200,
                    content_type: "text/html; charset=utf-8",
                    body: page::render(&status).into_bytes(),
                }
            } else {
                Response {
                    status: 200,
                    content_type: "application/json",
                    body: serde_json::to_vec_pretty(&status).expect("status serializes"),
                }
            }
        }
        _ => Response::text(
            404,
            "not found: try /, /metrics, /v1/status, /health/live, /health/ready\n",
        ),
    }
}

fn probe(result: Result<(), String>, what: &str) -> Response {
    match result {
        Ok(()) => Response::text(200, format!("{what}\n")),
        Err(why) => Response::text(503, format!("not {what}: {why}\n")),
    }
}

fn write_response(out: &mut impl Write, r: &Response, head_only: bool) -> io::Result<()> {
    let allow = if r.status == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n{allow}Connection: close\r\n\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    out.write_all(head.as_bytes())?;
    if !head_only {
        out.write_all(&r.body)?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<(String, String), Response> {
        read_request(&mut &bytes[..])
    }

    #[test]
    fn requests_are_parsed_or_refused_with_the_right_status() {
        assert_eq!(
            parse(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n").unwrap(),
            ("GET".to_string(), "/metrics?x=1".to_string())
        );
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\n").unwrap_err().status,
            400,
            "incomplete"
        );
        assert_eq!(parse(b"\x00\x01garbage\r\n\r\n").unwrap_err().status, 400);
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..HEADERS_MAX + 1 {
            many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(parse(&many).unwrap_err().status, 431);
        let mut huge = b"GET / HTTP/1.1\r\nX: ".to_vec();
        huge.resize(HEAD_BYTES_MAX + 10, b'a');
        assert_eq!(parse(&huge).unwrap_err().status, 431);
    }

    #[test]
    fn responses_carry_length_and_close_and_head_has_no_body() {
        let mut out = Vec::new();
        write_response(&mut out, &Response::text(405, "no\n"), false).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"));
        assert!(text.contains("Content-Length: 3\r\n") && text.contains("Allow: GET, HEAD"));
        assert!(text.ends_with("\r\n\r\nno\n"));
        let mut out = Vec::new();
        write_response(&mut out, &Response::text(200, "ok\n"), true).unwrap();
        assert!(String::from_utf8(out).unwrap().ends_with("\r\n\r\n"));
    }
}
