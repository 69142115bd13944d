//! Checker 9: storage carries out every effect a replica asks for. The
//! simulated disks never fail on their own, so a refused truncation, write
//! or persist is a disagreement between consensus and the partition: a bug
//! in one of them, and in a node a group that stops appending.

use super::Violation;

/// Stateless: checks each host after it settled.
#[derive(Debug, Default)]
pub struct StorageAgrees;

impl StorageAgrees {
    /// `replica`'s host settled; `failure` is its first storage failure.
    pub fn settled(&self, replica: u8, failure: Option<&str>) -> Result<(), Violation> {
        match failure {
            Some(failure) => Err(Violation {
                checker: "9 storage agrees",
                detail: format!("replica {replica}'s storage refused an effect: {failure}"),
            }),
            None => Ok(()),
        }
    }
}
