//! A change the active controller decides (ACLs, client quotas), answered once this broker has
//! applied it, so the client that made it sees it here at once.

use rill_metadata::request::{ControllerRequest, ControllerResponse};
use rill_metadata::types::LogIndex;
use rill_protocol::ErrorCode;

use super::Broker;

/// Why the request as a whole was not served: Kafka's error code and message.
pub type Failure = (ErrorCode, String);

/// Sends `request` to the controller and waits until this broker applied the change at the
/// index `take` finds in the answer (0: nothing was written). `take` gives back any other
/// answer; `what` names the change in the timeout message.
pub async fn through_controller<B: Broker, T>(
    broker: &B,
    request: ControllerRequest,
    what: &str,
    take: impl FnOnce(ControllerResponse) -> Result<(T, LogIndex), ControllerResponse>,
) -> Result<T, Failure> {
    let cluster = broker.cluster().expect("a cluster");
    match take(cluster.request(request, |d| broker.sleep(d)).await) {
        Ok((results, index)) => {
            if index.0 > 0 && !cluster.wait_applied(index, |d| broker.sleep(d)).await {
                return Err((
                    ErrorCode::RequestTimedOut,
                    format!("The {what} change is not applied on this broker yet"),
                ));
            }
            Ok(results)
        }
        Err(ControllerResponse::Error {
            error_code,
            message,
        }) => Err((error_code, message)),
        Err(other) => Err((
            ErrorCode::UnknownServerError,
            format!("unexpected controller answer {other:?}"),
        )),
    }
}
