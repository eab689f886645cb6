//! A connection of the metadata quorum (raft messages, brokers' controller requests): plaintext,
//! or TLS through rustls when the controller listener is mapped to SSL (with
//! `ssl.client.auth=required`, only holders of a certificate the listener's trust store signs can
//! reach the quorum at all).
//!
//! The quorum's sockets are blocking and shared: one thread reads a connection while others
//! write answers to it. Over TLS both sides of a connection share one rustls state, so a reader
//! takes the socket's bytes without the lock and feeds them to that state under it; a writer
//! encrypts and sends under the same lock. Nobody blocks on the socket while holding it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};

pub use crate::security::controller_tls::ControllerTls;

/// How long a TLS handshake on the quorum's sockets may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 16 * 1024;

/// One quorum connection, readable from one thread and writable from any.
pub struct ControllerStream {
    socket: TcpStream,
    tls: Option<Mutex<TlsState>>,
    /// Keeps plaintext frames whole when two threads write.
    plain_writer: Mutex<()>,
}

/// A TLS connection's rustls state and the bytes read from its socket not yet given to it.
struct TlsState {
    conn: Connection,
    unfed: Vec<u8>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ControllerStream {
    /// The accepting side: the TLS handshake first when `tls` is given.
    pub fn accept(socket: TcpStream, tls: Option<&Arc<ServerConfig>>) -> std::io::Result<Self> {
        let tls = match tls {
            None => None,
            Some(config) => Some(Connection::from(
                ServerConnection::new(config.clone()).map_err(std::io::Error::other)?,
            )),
        };
        Self::handshaken(socket, tls)
    }

    /// The connecting side, to `host` (the name its certificate must carry).
    pub fn connect(
        socket: TcpStream,
        tls: Option<&Arc<ClientConfig>>,
        host: &str,
    ) -> std::io::Result<Self> {
        let tls = match tls {
            None => None,
            Some(config) => {
                let name = ServerName::try_from(host.to_string()).map_err(|e| {
                    std::io::Error::other(format!("{host} is no TLS server name: {e}"))
                })?;
                Some(Connection::from(
                    ClientConnection::new(config.clone(), name).map_err(std::io::Error::other)?,
                ))
            }
        };
        Self::handshaken(socket, tls)
    }

    fn handshaken(socket: TcpStream, tls: Option<Connection>) -> std::io::Result<Self> {
        let tls = match tls {
            None => None,
            Some(mut conn) => {
                // Bounded: a peer that never finishes the handshake must not hold a thread.
                let before = socket.read_timeout()?;
                socket.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
                while conn.is_handshaking() {
                    conn.complete_io(&mut &socket)?;
                }
                socket.set_read_timeout(before)?;
                Some(Mutex::new(TlsState {
                    conn,
                    unfed: Vec::new(),
                }))
            }
        };
        Ok(Self {
            socket,
            tls,
            plain_writer: Mutex::new(()),
        })
    }

    /// The socket (for shutdown and timeouts).
    pub fn socket(&self) -> &TcpStream {
        &self.socket
    }

    /// Writes `data` whole, as one frame.
    pub fn write_frame(&self, data: &[u8]) -> std::io::Result<()> {
        match &self.tls {
            None => {
                let _whole = locked(&self.plain_writer);
                (&self.socket).write_all(data)
            }
            Some(tls) => {
                let conn = &mut locked(tls).conn;
                // rustls buffers a bounded amount of plaintext (64 KiB): encrypt and send
                // as it takes it.
                let mut rest = data;
                while !rest.is_empty() {
                    let taken = conn.writer().write(rest)?;
                    rest = &rest[taken..];
                    while conn.wants_write() {
                        conn.write_tls(&mut &self.socket)?;
                    }
                    if taken == 0 && !conn.wants_write() {
                        return Err(std::io::ErrorKind::WriteZero.into());
                    }
                }
                Ok(())
            }
        }
    }

    fn read_some(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some(tls) = &self.tls else {
            return (&self.socket).read(buf);
        };
        let mut chunk = vec![0u8; READ_CHUNK];
        loop {
            {
                let mut state = locked(tls);
                let TlsState { conn, unfed } = &mut *state;
                // Plaintext first: rustls takes no more records while its plaintext is unread.
                match conn.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                if !unfed.is_empty() {
                    let mut rest = &unfed[..];
                    let taken = conn.read_tls(&mut rest)?;
                    unfed.drain(..taken);
                    if let Err(e) = conn.process_new_packets() {
                        // Tell the peer why (the alert), then fail the connection.
                        let _ = conn.write_tls(&mut &self.socket);
                        return Err(std::io::Error::other(e));
                    }
                    while conn.wants_write() {
                        conn.write_tls(&mut &self.socket)?;
                    }
                    continue;
                }
            }
            // Blocks without the lock, so writers go on meanwhile.
            let n = (&self.socket).read(&mut chunk)?;
            if n == 0 {
                return Ok(0);
            }
            locked(tls).unfed.extend_from_slice(&chunk[..n]);
        }
    }
}

/// A reader of a shared stream (what `rill_metadata::wire` reads frames from).
pub struct SharedReader(pub Arc<ControllerStream>);

impl Read for SharedReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read_some(buf)
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;
    use crate::security::SecurityProtocol;

    /// A test CA and a node certificate it signed (for 127.0.0.1; valid until 2126).
    const CA: &str = include_str!("testdata/ca.pem");
    const NODE: &str = include_str!("testdata/node.pem");

    fn tls() -> ControllerTls {
        let get = |p: &str| match p {
            "ssl.keystore.location" | "ssl.keystore.key" => None,
            "ssl.truststore.certificates" => Some(CA.to_string()),
            "ssl.client.auth" => Some("required".to_string()),
            _ => None,
        };
        // The key store inline: key then chain, as one PEM text each.
        let with_keystore = move |p: &str| match p {
            "ssl.keystore.key" | "ssl.keystore.certificate.chain" => Some(NODE.to_string()),
            other => get(other),
        };
        crate::security::controller_tls::resolve(
            "CONTROLLER",
            SecurityProtocol::Ssl,
            &with_keystore,
        )
        .unwrap()
        .unwrap()
    }

    /// A connected pair over loopback: (accepted side, connecting side).
    fn pair(tls: &ControllerTls) -> (ControllerStream, ControllerStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let server = tls.server.clone();
        let accepted = std::thread::spawn(move || {
            let (socket, _) = listener.accept().unwrap();
            ControllerStream::accept(socket, Some(&server)).unwrap()
        });
        let socket = TcpStream::connect(address).unwrap();
        let client = ControllerStream::connect(socket, Some(&tls.client), "127.0.0.1").unwrap();
        (accepted.join().unwrap(), client)
    }

    #[test]
    fn frames_larger_than_a_tls_record_cross_whole_while_a_reader_blocks() {
        let tls = tls();
        let (server, client) = pair(&tls);
        let (server, client) = (Arc::new(server), Arc::new(client));
        // The server's reader blocks in read (no lock held) while the server answers.
        let reader = {
            let server = server.clone();
            std::thread::spawn(move || {
                let mut got = vec![0u8; 3 * 100_000];
                std::io::Read::read_exact(&mut SharedReader(server), &mut got).unwrap();
                got
            })
        };
        let answer: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        server.write_frame(&answer).unwrap();
        let mut back = vec![0u8; answer.len()];
        std::io::Read::read_exact(&mut SharedReader(client.clone()), &mut back).unwrap();
        assert_eq!(back, answer);
        let writers: Vec<_> = (0..3u8)
            .map(|w| {
                let client = client.clone();
                std::thread::spawn(move || client.write_frame(&vec![w; 100_000]).unwrap())
            })
            .collect();
        writers.into_iter().for_each(|w| w.join().unwrap());
        let got = reader.join().unwrap();
        // Each frame arrives whole, in some order.
        let mut firsts: Vec<u8> = got.chunks(100_000).map(|c| c[0]).collect();
        for chunk in got.chunks(100_000) {
            assert!(
                chunk.iter().all(|b| *b == chunk[0]),
                "a frame was interleaved"
            );
        }
        firsts.sort_unstable();
        assert_eq!(firsts, vec![0, 1, 2]);
    }

    #[test]
    fn a_client_without_a_certificate_is_refused() {
        let tls = tls();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let server = tls.server.clone();
        let accepted = std::thread::spawn(move || {
            let (socket, _) = listener.accept().unwrap();
            ControllerStream::accept(socket, Some(&server)).map(|_| ())
        });
        let get = |p: &str| (p == "ssl.truststore.certificates").then(|| CA.to_string());
        let anonymous = crate::security::peer_client::tls_client_for_tests(&get);
        let socket = TcpStream::connect(address).unwrap();
        let _ = ControllerStream::connect(socket, Some(&anonymous), "127.0.0.1");
        assert!(accepted.join().unwrap().is_err());
    }
}
