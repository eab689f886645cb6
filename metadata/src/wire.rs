//! Frames of the controller listener: raft messages between voters, and broker ↔ controller
//! requests. Kafka client traffic that lands on this port is told apart by the magic before
//! anything is allocated or parsed, and the connection is closed: never a crash.
//!
//! ```text
//! len:u32 (bytes after it) | magic "RLMQ" | version:u8 = 1 | kind:u8 | crc32c(body):u32 | body
//! kind 1 Raft      body = raft-rs Message (protobuf)
//! kind 2 Request   body = id:u64 | ControllerRequest (JSON)
//! kind 3 Response  body = id:u64 | ControllerResponse (JSON)
//! ```
//!
//! A Kafka request frame starts `size:i32 | api_key:i16 | api_version:i16`; its second word can
//! never be "RLMQ" (api key 0x524C is not a Kafka API), so the first 8 bytes decide.
//! The CRC is checked before the protobuf parser sees a byte (rust-protobuf 2, which raft-rs
//! 0.7 uses, trusts its input more than a parser at a trust boundary should).

use std::io::Read;

use protobuf::Message as _;
use raft::eraftpb::Message;

use crate::request::{ControllerRequest, ControllerResponse};

/// The frame magic.
pub const MAGIC: [u8; 4] = *b"RLMQ";
/// The frame format version.
pub const VERSION: u8 = 1;
/// Largest frame accepted (a snapshot of a big cluster's image travels in one raft message).
pub const FRAME_BYTES_MAX: usize = 64 << 20;
/// Bytes before the body: len, magic, version, kind, crc.
pub const HEADER_BYTES: usize = 14;

const KIND_RAFT: u8 = 1;
const KIND_REQUEST: u8 = 2;
const KIND_RESPONSE: u8 = 3;

/// One frame's content.
#[derive(Debug, Clone, PartialEq)]
pub enum WireMessage {
    /// Voter to voter.
    Raft(Message),
    /// Broker to controller; answered by a `Response` with the same id on the same connection.
    Request {
        /// Chosen by the sender, unique per connection.
        id: u64,
        /// The request.
        request: ControllerRequest,
    },
    /// Controller to broker.
    Response {
        /// The request's id.
        id: u64,
        /// The answer.
        response: ControllerResponse,
    },
}

/// Why a frame was refused (the connection is then closed).
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Not Rill's controller protocol (a Kafka client, or anything else).
    #[error("not a controller frame (magic {0:02x?})")]
    NotController([u8; 4]),
    /// A version this node does not speak.
    #[error("controller frame version {0}")]
    Version(u8),
    /// Longer than [`FRAME_BYTES_MAX`] or shorter than a header.
    #[error("controller frame of {0} bytes")]
    Length(usize),
    /// The body does not match its CRC, or does not parse.
    #[error("malformed controller frame: {0}")]
    Malformed(String),
    /// The stream failed or ended.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl WireMessage {
    /// The whole frame.
    pub fn encode(&self) -> Vec<u8> {
        let (kind, body) = match self {
            WireMessage::Raft(message) => (
                KIND_RAFT,
                message.write_to_bytes().expect("raft message encodes"),
            ),
            WireMessage::Request { id, request } => (KIND_REQUEST, with_id(*id, request)),
            WireMessage::Response { id, response } => (KIND_RESPONSE, with_id(*id, response)),
        };
        let len = u32::try_from(HEADER_BYTES - 4 + body.len()).expect("frame fits u32");
        let mut frame = Vec::with_capacity(HEADER_BYTES + body.len());
        frame.extend_from_slice(&len.to_be_bytes());
        frame.extend_from_slice(&MAGIC);
        frame.push(VERSION);
        frame.push(kind);
        frame.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        frame.extend_from_slice(&body);
        frame
    }

    /// Read one frame from a stream; the magic and length are checked before the body is read.
    pub fn read_from(stream: &mut impl Read) -> Result<WireMessage, WireError> {
        let mut header = [0u8; HEADER_BYTES];
        stream.read_exact(&mut header[..8])?;
        let magic: [u8; 4] = header[4..8].try_into().expect("4 bytes");
        if magic != MAGIC {
            return Err(WireError::NotController(magic));
        }
        let len = u32::from_be_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        if !(HEADER_BYTES - 4..=FRAME_BYTES_MAX).contains(&len) {
            return Err(WireError::Length(len));
        }
        stream.read_exact(&mut header[8..])?;
        let mut body = vec![0u8; len - (HEADER_BYTES - 4)];
        stream.read_exact(&mut body)?;
        Self::decode(&header, &body)
    }

    /// Parse a frame whose header and body were read.
    pub fn decode(header: &[u8; HEADER_BYTES], body: &[u8]) -> Result<WireMessage, WireError> {
        if header[4..8] != MAGIC {
            return Err(WireError::NotController(
                header[4..8].try_into().expect("4 bytes"),
            ));
        }
        if header[8] != VERSION {
            return Err(WireError::Version(header[8]));
        }
        let crc = u32::from_be_bytes(header[10..14].try_into().expect("4 bytes"));
        if crc32c::crc32c(body) != crc {
            return Err(WireError::Malformed("crc mismatch".into()));
        }
        let malformed = |e: &dyn std::fmt::Display| WireError::Malformed(e.to_string());
        match header[9] {
            KIND_RAFT => Message::parse_from_bytes(body)
                .map(WireMessage::Raft)
                .map_err(|e| malformed(&e)),
            KIND_REQUEST => {
                let (id, json) = split_id(body)?;
                let request = serde_json::from_slice(json).map_err(|e| malformed(&e))?;
                Ok(WireMessage::Request { id, request })
            }
            KIND_RESPONSE => {
                let (id, json) = split_id(body)?;
                let response = serde_json::from_slice(json).map_err(|e| malformed(&e))?;
                Ok(WireMessage::Response { id, response })
            }
            other => Err(WireError::Malformed(format!("frame kind {other}"))),
        }
    }
}

fn with_id(id: u64, value: &impl serde::Serialize) -> Vec<u8> {
    let mut body = id.to_be_bytes().to_vec();
    serde_json::to_writer(&mut body, value).expect("controller messages serialize");
    body
}

fn split_id(body: &[u8]) -> Result<(u64, &[u8]), WireError> {
    if body.len() < 8 {
        return Err(WireError::Malformed("body shorter than its id".into()));
    }
    let id = u64::from_be_bytes(body[..8].try_into().expect("8 bytes"));
    Ok((id, &body[8..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::NodeId;

    fn round_trip(message: WireMessage) {
        let frame = message.encode();
        let back = WireMessage::read_from(&mut frame.as_slice()).unwrap();
        assert_eq!(back, message);
    }

    #[test]
    fn every_kind_round_trips() {
        let raft = Message {
            to: 2,
            from: 1,
            term: 7,
            ..Default::default()
        };
        round_trip(WireMessage::Raft(raft));
        round_trip(WireMessage::Request {
            id: 9,
            request: ControllerRequest::AllocateProducerIds { node_id: NodeId(1) },
        });
        round_trip(WireMessage::Response {
            id: 9,
            response: ControllerResponse::NotController {
                leader: Some(NodeId(3)),
            },
        });
    }

    #[test]
    fn a_whole_image_travels_to_an_observer() {
        use crate::image::MetadataImage;
        use crate::record::{MetadataRecord, PartitionAssignment};
        use crate::types::{Endpoint, LogIndex};
        let mut image = MetadataImage::default();
        let register = MetadataRecord::RegisterBroker(crate::record::BrokerIdentity {
            node_id: NodeId(4),
            incarnation_id: uuid::Uuid::from_u128(1),
            log_dir_id: uuid::Uuid::from_u128(2),
            endpoint: Endpoint {
                host: "127.0.0.1".into(),
                port: 9092,
            },
            rack: None,
            replica_secret_sha256: None,
            listeners: Default::default(),
        });
        let topic = MetadataRecord::Topic {
            name: "t".into(),
            topic_id: uuid::Uuid::from_u128(3),
            internal: false,
            configs: Default::default(),
            partitions: vec![PartitionAssignment {
                replicas: vec![NodeId(4)],
                isr: vec![NodeId(4)],
                leader: Some(NodeId(4)),
            }],
        };
        image.apply_entry(LogIndex(1), 1, &[register, topic]);
        round_trip(WireMessage::Response {
            id: 1,
            response: ControllerResponse::Image {
                image: Some(Box::new(image)),
            },
        });
    }

    #[test]
    fn kafka_requests_are_refused_by_their_first_eight_bytes() {
        // ApiVersions v3 as librdkafka sends it: size, api key 18, version 3, ...
        let kafka = [0, 0, 0, 30, 0, 18, 0, 3, 0, 0, 0, 1, 0, 7];
        let mut stream = kafka.as_slice();
        assert!(matches!(
            WireMessage::read_from(&mut stream),
            Err(WireError::NotController(_))
        ));
        // Only the first 8 bytes were consumed.
        assert_eq!(stream.len(), kafka.len() - 8);
    }

    #[test]
    fn every_truncation_and_every_flipped_bit_is_an_error_not_a_panic() {
        let frame = WireMessage::Request {
            id: 1,
            request: ControllerRequest::AllocateProducerIds { node_id: NodeId(1) },
        }
        .encode();
        for cut in 0..frame.len() {
            assert!(
                WireMessage::read_from(&mut &frame[..cut]).is_err(),
                "cut {cut}"
            );
        }
        for byte in 0..frame.len() {
            for bit in 0..8 {
                let mut damaged = frame.clone();
                damaged[byte] ^= 1 << bit;
                // A flipped length may still describe a readable (shorter) frame: any outcome
                // but a panic or a wrong success is fine.
                if let Ok(m) = WireMessage::read_from(&mut damaged.as_slice()) {
                    panic!("byte {byte} bit {bit} accepted as {m:?}");
                }
            }
        }
        let mut huge = frame.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            WireMessage::read_from(&mut huge.as_slice()),
            Err(WireError::Length(_))
        ));
    }
}
