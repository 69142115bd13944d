//! Per-topic policies carried by CreateTopic and stamped on every partition:
//! durability (when a copy counts) and confirm policy (how many copies count).

use crate::error::BodyError;

/// When a replica's copy of a prepare counts toward the confirm rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Durability {
    /// A copy counts once fsynced. Survives any minority crashing at any time,
    /// power loss included. The default.
    #[default]
    Persisted = 1,
    /// A copy counts once queued to the WAL writer. Faster; a replica that
    /// crashes may return missing ops it acked, so its log is untrusted until it
    /// adopts a settled view.
    Replicated = 2,
}

impl Durability {
    /// Parses the wire byte.
    pub fn from_u8(value: u8) -> Result<Durability, BodyError> {
        match value {
            1 => Ok(Durability::Persisted),
            2 => Ok(Durability::Replicated),
            _ => Err(BodyError::UnknownValue {
                field: "durability",
                value: u64::from(value),
            }),
        }
    }

    /// The name used in configuration, CLI flags and status output.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Persisted => "persisted",
            Durability::Replicated => "replicated",
        }
    }
}

/// How many copies (the primary's included) must hold a prepare durably before
/// it is confirmed. One function in `consensus` turns it into `W` and `R`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ConfirmPolicy {
    /// A majority of the replicas: `W = E / 2 + 1`. The default.
    #[default]
    MajorityDurable,
    /// Every copy: `W = E`.
    LocalDurable,
    /// Exactly `n` copies, capped at `E`; never 0.
    Count(u8),
}

impl ConfirmPolicy {
    /// The two wire bytes: kind, then count (0 unless `Count`).
    pub fn to_bytes(self) -> [u8; 2] {
        match self {
            ConfirmPolicy::MajorityDurable => [1, 0],
            ConfirmPolicy::LocalDurable => [2, 0],
            ConfirmPolicy::Count(count) => [3, count],
        }
    }

    /// Parses the two wire bytes.
    pub fn from_bytes(bytes: [u8; 2]) -> Result<ConfirmPolicy, BodyError> {
        match bytes {
            [1, 0] => Ok(ConfirmPolicy::MajorityDurable),
            [2, 0] => Ok(ConfirmPolicy::LocalDurable),
            [3, 0] => Err(BodyError::Invalid {
                field: "confirm policy",
                reason: "count of 0",
            }),
            [3, count] => Ok(ConfirmPolicy::Count(count)),
            [1 | 2, _] => Err(BodyError::Invalid {
                field: "confirm policy",
                reason: "count given for a policy without one",
            }),
            [kind, _] => Err(BodyError::UnknownValue {
                field: "confirm policy",
                value: u64::from(kind),
            }),
        }
    }
}

impl core::fmt::Display for ConfirmPolicy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConfirmPolicy::MajorityDurable => f.write_str("majority_durable"),
            ConfirmPolicy::LocalDurable => f.write_str("local_durable"),
            ConfirmPolicy::Count(count) => write!(f, "count({count})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_round_trip_and_reject_unknown() {
        for policy in [
            ConfirmPolicy::MajorityDurable,
            ConfirmPolicy::LocalDurable,
            ConfirmPolicy::Count(1),
            ConfirmPolicy::Count(255),
        ] {
            assert_eq!(ConfirmPolicy::from_bytes(policy.to_bytes()), Ok(policy));
        }
        assert!(ConfirmPolicy::from_bytes([3, 0]).is_err());
        assert!(ConfirmPolicy::from_bytes([1, 7]).is_err());
        assert!(ConfirmPolicy::from_bytes([0, 0]).is_err());
        assert!(ConfirmPolicy::from_bytes([9, 0]).is_err());
        for durability in [Durability::Persisted, Durability::Replicated] {
            assert_eq!(Durability::from_u8(durability as u8), Ok(durability));
        }
        assert!(Durability::from_u8(0).is_err());
        assert!(Durability::from_u8(3).is_err());
        assert_eq!(Durability::default(), Durability::Persisted);
        assert_eq!(ConfirmPolicy::default(), ConfirmPolicy::MajorityDurable);
    }
}
