//! One blocking Kafka connection: a request (any API, any version) out, its decoded response in.
//!
//! The differential suite sends exactly the same bytes to both brokers, so the request is encoded
//! once per version by the caller's builder and framed here; nothing is retried.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use rill_protocol::kafka_protocol::messages::{
    ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
};
use rill_protocol::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The largest response the suite accepts (a Fetch of test-sized topics is far below).
const RESPONSE_BYTES_MAX: usize = 64 << 20;
/// How long one response may take: above every long poll a case asks for.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// What came back for one request.
#[derive(Debug)]
pub enum Answer {
    /// A decoded response.
    Response(Box<ResponseKind>),
    /// The broker closed the connection instead of answering (the connection is reopened).
    Closed,
    /// An acks=0 Produce: no response is expected and none was read.
    NoResponse,
}

/// A connection to one broker that reconnects after the broker closed it.
pub struct Connection {
    address: String,
    stream: Option<TcpStream>,
    correlation_id: i32,
}

impl Connection {
    /// Remembers the address; connects on first use.
    pub fn new(address: &str) -> Connection {
        Connection {
            address: address.to_string(),
            stream: None,
            correlation_id: 0,
        }
    }

    /// The broker's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    fn stream(&mut self) -> anyhow::Result<&mut TcpStream> {
        if self.stream.is_none() {
            let stream = TcpStream::connect(&self.address)
                .with_context(|| format!("connecting to {}", self.address))?;
            stream.set_read_timeout(Some(READ_TIMEOUT))?;
            stream.set_nodelay(true)?;
            self.stream = Some(stream);
        }
        Ok(self.stream.as_mut().expect("connected above"))
    }

    /// Encodes `request` at `version`, sends it and reads its response.
    pub fn call(&mut self, request: &RequestKind, version: i16) -> anyhow::Result<Answer> {
        let api_key = api_key_of(request);
        let frame = encode_request(request, api_key, version, self.next_correlation())?;
        let expects_response = !matches!(request, RequestKind::Produce(p) if p.acks == 0);
        self.call_raw(&frame, api_key, version, expects_response)
    }

    /// Sends an already framed request (size prefix included) and reads its response.
    pub fn call_raw(
        &mut self,
        frame: &[u8],
        api_key: ApiKey,
        version: i16,
        expects_response: bool,
    ) -> anyhow::Result<Answer> {
        let stream = self.stream()?;
        if stream.write_all(frame).is_err() {
            self.stream = None;
            return Ok(Answer::Closed);
        }
        if !expects_response {
            return Ok(Answer::NoResponse);
        }
        let Some(body) = read_frame(self.stream()?)? else {
            self.stream = None;
            return Ok(Answer::Closed);
        };
        decode_response(body, api_key, version).map(|r| Answer::Response(Box::new(r)))
    }

    fn next_correlation(&mut self) -> i32 {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        self.correlation_id
    }
}

/// The request's API key.
pub fn api_key_of(request: &RequestKind) -> ApiKey {
    macro_rules! key {
        ($($variant:ident),* $(,)?) => {
            match request {
                $(RequestKind::$variant(_) => ApiKey::$variant,)*
                _ => panic!("the differential suite sends no {request:?}"),
            }
        };
    }
    key!(
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        OffsetCommit,
        OffsetFetch,
        FindCoordinator,
        JoinGroup,
        Heartbeat,
        LeaveGroup,
        SyncGroup,
        DescribeGroups,
        ListGroups,
        ApiVersions,
        SaslAuthenticate,
        AlterUserScramCredentials,
        CreateTopics,
        DeleteTopics,
        DeleteRecords,
        InitProducerId,
        OffsetForLeaderEpoch,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        WriteTxnMarkers,
        TxnOffsetCommit,
        DescribeConfigs,
        AlterConfigs,
        AlterReplicaLogDirs,
        DescribeLogDirs,
        CreatePartitions,
        DeleteGroups,
        ElectLeaders,
        IncrementalAlterConfigs,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        OffsetDelete,
        DescribeCluster,
        DescribeProducers,
        DescribeTransactions,
        ListTransactions,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        DescribeClientQuotas,
        DescribeTopicPartitions,
        AlterClientQuotas,
        DescribeUserScramCredentials,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
        ShareGroupHeartbeat,
        ShareGroupDescribe,
        ShareFetch,
        ShareAcknowledge,
        DescribeShareGroupOffsets,
        AlterShareGroupOffsets,
        DeleteShareGroupOffsets,
        SaslHandshake,
    )
}

/// A whole request frame: size prefix, header (of the version's header version), body.
pub fn encode_request(
    request: &RequestKind,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
) -> anyhow::Result<Vec<u8>> {
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("rill-kdiff")));
    let mut body = BytesMut::new();
    header.encode(&mut body, api_key.request_header_version(version))?;
    request
        .encode(&mut body, version)
        .with_context(|| format!("encoding {api_key:?} v{version}"))?;
    let mut frame = Vec::with_capacity(body.len() + 4);
    frame.put_i32(i32::try_from(body.len())?);
    frame.extend_from_slice(&body);
    Ok(frame)
}

fn decode_response(mut body: Bytes, api_key: ApiKey, version: i16) -> anyhow::Result<ResponseKind> {
    ResponseHeader::decode(&mut body, api_key.response_header_version(version))?;
    let response = ResponseKind::decode(api_key, &mut body, version)
        .with_context(|| format!("decoding {api_key:?} v{version} response"))?;
    if body.has_remaining() {
        bail!(
            "{api_key:?} v{version} response has {} bytes left over",
            body.remaining()
        );
    }
    Ok(response)
}

/// One size-prefixed frame's body; `None` when the peer closed the connection first.
fn read_frame(stream: &mut TcpStream) -> anyhow::Result<Option<Bytes>> {
    let mut size = [0u8; 4];
    match stream.read_exact(&mut size) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(None),
        Err(e) => return Err(e).context("reading a response size"),
    }
    let size = usize::try_from(i32::from_be_bytes(size)).context("negative response size")?;
    if size > RESPONSE_BYTES_MAX {
        bail!("response of {size} bytes");
    }
    let mut body = vec![0u8; size];
    stream
        .read_exact(&mut body)
        .context("reading a response body")?;
    Ok(Some(Bytes::from(body)))
}
