//! InitProducerId: an idempotent producer's id and epoch. Transactional
//! producers (a transactional id) are refused.

use bytes::BytesMut;

use crate::api::RequestHeader;
use crate::codec::{Reader, Writer};
use crate::error::DecodeError;

/// An InitProducerId request, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitProducerIdRequest {
    /// Set by a transactional producer.
    pub transactional_id: Option<String>,
    /// The producer's current id when it asks for a new epoch (-1: none).
    pub producer_id: i64,
    /// Its current epoch (-1: none).
    pub producer_epoch: i16,
}

/// Reads an InitProducerId body.
pub fn decode(
    header: &RequestHeader,
    body: &mut Reader,
) -> Result<InitProducerIdRequest, DecodeError> {
    let transactional_id = body.nullable_string("transactional id")?;
    body.i32("transaction timeout ms")?;
    let (producer_id, producer_epoch) = match header.version >= 3 {
        true => (body.i64("producer id")?, body.i16("producer epoch")?),
        false => (-1, -1),
    };
    body.tagged_fields()?;
    Ok(InitProducerIdRequest {
        transactional_id,
        producer_id,
        producer_epoch,
    })
}

/// Encodes an InitProducerId response body.
pub fn encode(
    header: &RequestHeader,
    error_code: i16,
    producer_id: i64,
    producer_epoch: i16,
) -> BytesMut {
    let mut writer = Writer::new(header.flexible());
    writer.i32(0);
    writer.i16(error_code);
    writer.i64(producer_id);
    writer.i16(producer_epoch);
    writer.tagged_fields();
    writer.finish()
}

/// Producer ids this node hands out are below this bound, so that an id
/// and its epoch pack into the 64 bits a sequenced client's id keeps for
/// them ([`producer_client_bits`]).
pub const PRODUCER_ID_LIMIT: i64 = 1 << 47;

/// The low 64 bits of the sequenced client id of producer `producer_id` at
/// `epoch` (see `strand_wire::sequenced`), or `None` for an id or epoch
/// this node never hands out.
pub fn producer_client_bits(producer_id: i64, epoch: i16) -> Option<u64> {
    if !(0..PRODUCER_ID_LIMIT).contains(&producer_id) || epoch < 0 {
        return None;
    }
    Some(((epoch as u64) << 48) | producer_id as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_producer_and_epoch_packs_to_its_own_bits() {
        assert_eq!(producer_client_bits(5, 0), Some(5));
        assert_ne!(producer_client_bits(5, 1), producer_client_bits(5, 0));
        assert_eq!(producer_client_bits(-1, 0), None);
        assert_eq!(producer_client_bits(PRODUCER_ID_LIMIT, 0), None);
        assert_eq!(producer_client_bits(1, -1), None);
    }
}
