//! A blocking Kafka connection: whole frames out, whole frames in, with a read deadline; and
//! typed calls for the friendly clients and the probe (encoded and decoded by the same
//! `kafka_protocol` the broker uses, so a mismatch is the broker's, not this tool's).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use rill_protocol::kafka_protocol::messages::{ApiKey, RequestKind, ResponseHeader, ResponseKind};
use rill_protocol::kafka_protocol::protocol::Decodable;
use rill_protocol::request::Request;

/// Largest response frame accepted (a Fetch answers at most its 50 MiB max_bytes and some).
pub const RESPONSE_BYTES_MAX: usize = 256 << 20;

/// One connection to one broker.
pub struct Conn {
    stream: TcpStream,
    next_correlation_id: i32,
}

/// How reading a frame ended without one.
#[derive(Debug)]
pub enum ReadEnd {
    /// The broker closed the connection.
    Closed,
    /// Nothing (whole) arrived before the deadline.
    TimedOut,
    /// A size prefix no broker sends.
    Absurd(i32),
    /// Another I/O error.
    Io,
}

impl Conn {
    /// Connects within `timeout`, reads giving up after `read_timeout`.
    pub fn connect(
        addr: SocketAddr,
        timeout: Duration,
        read_timeout: Duration,
    ) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(read_timeout))?;
        stream.set_write_timeout(Some(Duration::from_secs(30)))?;
        Ok(Conn {
            stream,
            next_correlation_id: 1,
        })
    }

    /// Changes the read deadline for the next reads.
    pub fn set_read_timeout(&self, timeout: Duration) -> io::Result<()> {
        self.stream.set_read_timeout(Some(timeout))
    }

    /// Writes `bytes` whole.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Stops writing (the broker sees EOF after what was sent).
    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
    }

    /// Reads one frame into `buf` (without its size prefix).
    pub fn read_frame(&mut self, buf: &mut Vec<u8>) -> Result<(), ReadEnd> {
        let mut prefix = [0u8; 4];
        self.read_exact(&mut prefix)?;
        let size = i32::from_be_bytes(prefix);
        if size < 0 || size as usize > RESPONSE_BYTES_MAX {
            return Err(ReadEnd::Absurd(size));
        }
        buf.resize(size as usize, 0);
        self.read_exact(buf)
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), ReadEnd> {
        let mut at = 0;
        while at < buf.len() {
            match self.stream.read(&mut buf[at..]) {
                Ok(0) => return Err(ReadEnd::Closed),
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(ReadEnd::TimedOut)
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
                    ) =>
                {
                    return Err(ReadEnd::Closed)
                }
                Err(_) => return Err(ReadEnd::Io),
            }
        }
        Ok(())
    }

    /// One typed request and its answer.
    pub fn call(
        &mut self,
        api: ApiKey,
        version: i16,
        body: RequestKind,
    ) -> Result<ResponseKind, String> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let request = Request::new(api, version, correlation_id, "livefuzz-friendly", body);
        let bytes = request.encode()?;
        self.send(&wire_frame(&bytes))
            .map_err(|e| format!("{api:?}: send: {e}"))?;
        let mut buf = Vec::new();
        self.read_frame(&mut buf)
            .map_err(|e| format!("{api:?}: read: {e:?}"))?;
        let mut buf = Bytes::from(buf);
        let header = ResponseHeader::decode(&mut buf, api.response_header_version(version))
            .map_err(|e| format!("{api:?}: response header: {e:#}"))?;
        if header.correlation_id != correlation_id {
            return Err(format!(
                "{api:?}: correlation id {} for {correlation_id}",
                header.correlation_id
            ));
        }
        ResponseKind::decode(api, &mut buf, version)
            .map_err(|e| format!("{api:?}: response: {e:#}"))
    }
}

/// `bytes` with its size prefix.
pub fn wire_frame(bytes: &[u8]) -> Vec<u8> {
    rill_livefuzz::wire::frame(bytes)
}
