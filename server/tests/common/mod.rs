//! What every integration test needs: a real `rill` process on a free loopback port with a temp
//! data dir, and a raw Kafka client over TCP (requests encoded with kafka-protocol, the crate
//! rill-protocol re-exports).

// Each test crate compiles this module and uses a different subset of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use rill_protocol::kafka_protocol::messages::{ApiKey, RequestKind, ResponseHeader};
use rill_protocol::kafka_protocol::protocol::Decodable;
use rill_protocol::request::Request;

/// How long a broker may take to start answering, or to stop on SIGTERM (debug build, 2 cores).
const BROKER_WAIT_MAX: Duration = Duration::from_secs(20);

/// A `rill` child process; killed on drop so a failing test leaves nothing running.
pub struct Broker {
    child: Child,
    pub port: u16,
}

impl Broker {
    /// Start `rill` with 2 shards and wait until it answers ApiVersions.
    pub fn start(data_dir: &Path, port: u16, default_partitions: i32) -> Broker {
        let child = Command::new(env!("CARGO_BIN_EXE_rill"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--data-dir", data_dir.to_str().unwrap()])
            .args(["--shards", "2"])
            .args(["--default-partitions", &default_partitions.to_string()])
            // Never the default 9644: tests run side by side.
            .args(["--admin-listen", "127.0.0.1:0"])
            // Groups form at once: these tests join one member at a time and do not heartbeat
            // while joining the next (the delay has its own tests).
            .args(["--group-initial-rebalance-delay-ms", "0"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("start rill");
        let started = Instant::now();
        // Ready = answers ApiVersions. A bare connect is not enough right after a kill -9: the
        // dead process's io_uring-held listener can linger for a moment, accept, then reset.
        while !answers_api_versions(port) {
            assert!(started.elapsed() < BROKER_WAIT_MAX, "rill did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Broker { child, port }
    }

    /// A new client connection with a read timeout, so a missing answer fails instead of hanging.
    pub fn connect(&self) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream.set_read_timeout(Some(BROKER_WAIT_MAX)).unwrap();
        Client {
            stream,
            correlation_id: 0,
        }
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(mut self) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped); no memory passed.
        let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
        assert_eq!(rc, 0, "SIGTERM failed");
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "rill exited with {status}");
                return;
            }
            assert!(
                started.elapsed() < BROKER_WAIT_MAX,
                "rill did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: no flush, no clean close.
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn answers_api_versions(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    // ApiVersions v0, correlation id 1, null client id.
    let request = [0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 255, 255];
    let mut size = [0u8; 4];
    stream.write_all(&request).is_ok() && stream.read_exact(&mut size).is_ok()
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// One Kafka connection, speaking raw frames.
pub struct Client {
    pub stream: TcpStream,
    pub correlation_id: i32,
}

impl Client {
    /// Write one size-prefixed frame.
    pub fn send_frame(&mut self, body: &[u8]) {
        let mut frame = BytesMut::new();
        frame.put_i32(body.len() as i32);
        frame.put_slice(body);
        self.stream.write_all(&frame).unwrap();
    }

    /// Read one frame body; None when the broker closed the connection (or timed out).
    pub fn read_frame(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).ok()?;
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut body).ok()?;
        Some(Bytes::from(body))
    }

    /// Send a request without reading its response (pipelining); returns its correlation id.
    pub fn send<Req: Clone + Into<RequestKind>>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> i32 {
        self.correlation_id += 1;
        let request = Request::new(
            key,
            version,
            self.correlation_id,
            "rill-it",
            request.clone().into(),
        );
        self.send_frame(&request.encode().unwrap());
        self.correlation_id
    }

    /// Send a request and decode its response, checking the correlation id.
    pub fn call<Req: Clone + Into<RequestKind>, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Resp {
        let correlation_id = self.send(key, version, request);
        let mut frame = self.read_frame().expect("response");
        let response_header =
            ResponseHeader::decode(&mut frame, key.response_header_version(version)).unwrap();
        assert_eq!(response_header.correlation_id, correlation_id);
        Resp::decode(&mut frame, version).unwrap()
    }
}
