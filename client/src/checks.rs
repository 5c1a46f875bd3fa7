//! What is checked before a request is sent: a topic's name ([`check_topic`]), so a bad one
//! fails at once as [`ClientError::InvalidTopic`] instead of as the broker's refusal.

use starling_proto::validate_topic;

use crate::ClientError;

/// `topic` as a valid topic name, or [`ClientError::InvalidTopic`] saying why not.
pub(crate) fn check_topic(topic: &str) -> Result<(), ClientError> {
    validate_topic(topic).map_err(|why| ClientError::InvalidTopic(format!("{topic:?}: {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_checked_before_sending() {
        assert!(check_topic("orders").is_ok());
        let err = check_topic("a b").map_err(|e| e.to_string());
        assert_eq!(
            err,
            Err("invalid topic: \"a b\": topic contains whitespace".into())
        );
    }
}
